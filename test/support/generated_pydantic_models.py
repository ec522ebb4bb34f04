"""Parses a real engine's answers with the pydantic models datamodel-code-generator generated from its OpenAPI document.

test/e2e/generated-clients.e2e-spec.ts generates the module (default options: no `--strict-nullable`) and runs this
with the pinned generator venv (scripts/generator-tools.sh). Usage: generated_pydantic_models.py MODULE_FILE BASE_URL.
The requests go out with the standard library; every answer is validated by the generated model of its schema
(`model_validate`, which raises on any answer the model refuses), and what the models read is printed as JSON.
"""

import importlib.util
import json
import sys
import urllib.request

spec = importlib.util.spec_from_file_location("generated_models", sys.argv[1])
m = importlib.util.module_from_spec(spec)
# pydantic resolves the module's generic RootModels through sys.modules.
sys.modules["generated_models"] = m
spec.loader.exec_module(m)
base_url = sys.argv[2]


def request(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base_url + path, data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req) as res:
        return json.load(res)


def kind(value):
    """The generated class a value was read as, through the RootModel wrappers of unions."""
    while hasattr(value, "root") and not isinstance(value.root, (list, dict, str)):
        value = value.root
    return type(value).__name__


fresh = m.Session.model_validate(request("POST", "/v1/sessions", {"metadata": {"owner": "generated-models"}}))
sid = fresh.id
code = m.ActionResult.model_validate(
    request("POST", f"/v1/sessions/{sid}/actions", {"type": "code", "language": "python", "code": "print(6 * 7)"})
)
cell = m.ActionResult.model_validate(
    request(
        "POST",
        f"/v1/sessions/{sid}/actions",
        {"type": "code", "language": "python", "code": "6 * 7", "state": "session"},
    )
)
listing = m.ActionResult.model_validate(
    request("POST", f"/v1/sessions/{sid}/actions", {"type": "file", "op": "list", "path": "."})
)
view = m.ActionView.model_validate(request("GET", f"/v1/sessions/{sid}/actions/{code.id}"))
session = m.Session.model_validate(request("GET", f"/v1/sessions/{sid}"))
calls = [
    {"id": "c1", "name": "bash", "input": {"command": "echo hi"}},
    {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": '{"command": "echo hi"}'},
    {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "echo hi"}'}},
    {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "echo hi"}},
]
answers = [m.ToolCallAnswer.model_validate(a) for a in request("POST", f"/v1/sessions/{sid}/tool-calls", calls)]
tools = m.ToolList.model_validate(request("GET", "/v1/tools?format=openai-responses"))

print(
    json.dumps(
        {
            "session": {"before": fresh.activity.lastActionAt, "after": session.activity.lastActionAt is not None},
            "code": {"type": kind(code), "status": code.status.value, "stdout": code.stdout},
            "cell": {"output": kind(cell.output), "result": cell.output.root.result},
            "listing": {"output": kind(listing.output)},
            "view": {"type": kind(view), "id": view.id == code.id},
            "answers": [kind(a) for a in answers],
            "tools": kind(tools.tools.root[0]) if hasattr(tools.tools, "root") else kind(tools.tools[0]),
        }
    )
)

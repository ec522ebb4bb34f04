"""Drives a real engine with the Python client openapi-python-client generated from its OpenAPI document.

test/e2e/generated-clients.e2e-spec.ts generates the package (`--meta none`, so the directory is the package) and runs
this with the pinned generator venv (scripts/generator-tools.sh: the generated code needs httpx, attrs and
python-dateutil). Usage: generated_python_client.py PACKAGE_DIR BASE_URL. Creates a session, runs code, calls a tool
in two shapes, and prints what the generated models parsed, as JSON: the type names and the values read through them.
"""

import importlib
import json
import sys
from pathlib import Path

package_dir = Path(sys.argv[1])
base_url = sys.argv[2]
sys.path.insert(0, str(package_dir.parent))
generated = importlib.import_module(package_dir.name)
models = importlib.import_module(f"{package_dir.name}.models")
create_session = importlib.import_module(f"{package_dir.name}.api.sessions.sessions_controller_create")
get_session = importlib.import_module(f"{package_dir.name}.api.sessions.sessions_controller_get")
run_action = importlib.import_module(f"{package_dir.name}.api.actions.actions_controller_run")
call_tools = importlib.import_module(f"{package_dir.name}.api.tools.tools_controller_call")
list_tools = importlib.import_module(f"{package_dir.name}.api.tools.tools_controller_list")

client = generated.Client(base_url=base_url, raise_on_unexpected_status=True)

metadata = models.CreateSessionDtoMetadataType0.from_dict({"owner": "generated-client", "run": 1})
session = create_session.sync(client=client, body=models.CreateSessionDto(metadata=metadata))
again = get_session.sync(session.id, client=client)

code = models.CodeActionDto(
    type_=models.CodeActionDtoType.CODE,
    language=models.CodeActionDtoLanguage.PYTHON,
    code="print(6 * 7)",
)
result = run_action.sync(session.id, client=client, body=code)

plain = models.PlainToolCall(id="c1", name="bash", input_=models.PlainToolCallInput.from_dict({"command": "echo hi"}))
responses_call = models.ResponsesFunctionCall(
    type_=models.ResponsesFunctionCallType.FUNCTION_CALL,
    call_id="call_1",
    name="bash",
    arguments=json.dumps({"command": "echo $((6 * 7))"}),
)
answers = call_tools.sync(session.id, client=client, body=[plain, responses_call])
single = call_tools.sync(session.id, client=client, body=responses_call)
tools = list_tools.sync(client=client, format_=models.ToolsControllerListFormat("openai-responses"))

print(
    json.dumps(
        {
            "session": {"type": type(session).__name__, "id": session.id, "same": again.id == session.id},
            "metadata": again.metadata.to_dict(),
            "lastActionAt": None if again.activity.last_action_at is None else str(again.activity.last_action_at),
            "result": {
                "type": type(result).__name__,
                "status": result.status.value,
                "stdout": result.stdout,
                "exitCode": result.exit_code,
            },
            "answers": [{"type": type(a).__name__, **a.to_dict()} for a in answers],
            "single": {"type": type(single).__name__, "item": single.item.to_dict()},
            "tools": {"type": type(tools.tools[0]).__name__, "first": tools.tools[0].name},
        }
    )
)

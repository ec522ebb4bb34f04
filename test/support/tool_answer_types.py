"""Checks tool-call answers against the model APIs' own types (test/e2e/tool-images.e2e-spec.ts runs it).

Run with the pinned client venv (scripts/client-tools.sh: anthropic, openai, pydantic). Reads a JSON list of cases on
stdin, each `{"name", "format", "answer", "images"}`: `format` is the call's shape (`plain`, `anthropic`, `openai`
for Chat Completions, `responses` for the Responses API), `answer` what the engine answered it, `images` the images
the answer must carry, in order (`{"mimeType", "base64"}`). Prints `{"checked": n, "failures": [...]}`. A case of
format `responses-tool` is a tool of `GET /v1/tools?format=openai-responses` (its `answer`), checked as one.

Each answer is validated by the packages' pydantic types with `TypeAdapter`, strictly (no coercion) and whole: the
validated value, its lazy iterables drawn, must equal the answer, so a key the type does not know (which pydantic
drops from a TypedDict) fails too.
"""

import base64
import json
import sys
from collections.abc import Iterable, Mapping

from anthropic.types import MessageParam, ToolResultBlockParam
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolMessageParam
from openai.types.responses import FunctionToolParam, ResponseInputItemParam
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter, ValidationError

ADAPTERS = {
    "ToolResultBlockParam": TypeAdapter(ToolResultBlockParam),
    "MessageParam": TypeAdapter(MessageParam),
    "ChatCompletionToolMessageParam": TypeAdapter(ChatCompletionToolMessageParam),
    "ChatCompletionMessageParam": TypeAdapter(ChatCompletionMessageParam),
    "ResponseInputItemParam": TypeAdapter(ResponseInputItemParam),
    "FunctionCallOutput": TypeAdapter(FunctionCallOutput),
    "FunctionToolParam": TypeAdapter(FunctionToolParam),
}


def drawn(value):
    """The validated value as plain data: pydantic validates `Iterable[...]` fields lazily, as iterators."""
    if isinstance(value, Mapping):
        return {k: drawn(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Iterable):
        return [drawn(v) for v in value]
    return value


def check(type_name, value):
    """Why `value` is not a `type_name`, or None when it is one, exactly."""
    try:
        validated = drawn(ADAPTERS[type_name].validate_python(value, strict=True))
    except ValidationError as err:
        return "%s: %s" % (type_name, err)
    if validated != value:
        return "%s: the type does not take it whole: %r, validated as %r" % (type_name, value, validated)
    return None


def anthropic_images(content):
    if isinstance(content, str):
        return []
    return [
        {"mimeType": b["source"]["media_type"], "base64": b["source"]["data"]} for b in content if b["type"] == "image"
    ]


def responses_images(output):
    if isinstance(output, str):
        return []
    images = []
    for item in output:
        if item["type"] != "input_image":
            continue
        head, _, data = str(item.get("image_url")).partition(",")
        if not head.startswith("data:") or not head.endswith(";base64"):
            images.append({"mimeType": "not a base64 data URL: %s" % head, "base64": ""})
            continue
        images.append({"mimeType": head[len("data:") : -len(";base64")], "base64": data})
    return images


def problems(case):
    """What is wrong with one case's answer."""
    answer = case["answer"]
    shape = case["format"]
    found = []
    if shape == "responses-tool":
        # Not an answer: a tool of GET /v1/tools?format=openai-responses, as the Responses API's `tools` takes it.
        return [p for p in [check("FunctionToolParam", answer)] if p]
    if shape == "anthropic":
        found += [check("ToolResultBlockParam", answer), check("MessageParam", {"role": "user", "content": [answer]})]
        images = anthropic_images(answer["content"])
    elif shape == "plain":
        # Anthropic's tool_result but for `type`: with it, the block as is.
        if set(answer) != {"tool_use_id", "content", "is_error"}:
            found.append("plain: keys %s" % sorted(answer))
        block = {"type": "tool_result", **answer}
        found += [check("ToolResultBlockParam", block)]
        images = anthropic_images(answer["content"])
    elif shape == "openai":
        message = answer["message"]
        found += [check("ChatCompletionToolMessageParam", message), check("ChatCompletionMessageParam", message)]
        if message["content"] != answer["content"]:
            found.append("openai: message.content is not content")
        images = []
    elif shape == "responses":
        item = answer["item"]
        found += [check("ResponseInputItemParam", item), check("FunctionCallOutput", item)]
        if item.get("call_id") != answer["call_id"]:
            found.append("responses: item.call_id is not call_id")
        images = responses_images(item["output"])
    else:
        return ["unknown format %r" % shape]
    expected = case["images"]
    if [i["mimeType"] for i in images] != [i["mimeType"] for i in expected]:
        found.append("images %s, expected %s" % ([i["mimeType"] for i in images], [i["mimeType"] for i in expected]))
    else:
        for got, want in zip(images, expected, strict=True):
            if base64.b64decode(got["base64"], validate=True) != base64.b64decode(want["base64"]):
                found.append("the %s image's bytes are not the expected ones" % got["mimeType"])
    return [p for p in found if p]


def problems_of(case):
    """`problems`, an answer of the wrong shape altogether being one too."""
    try:
        return problems(case)
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        return ["not an answer of its shape: %r" % err]


def main():
    cases = json.load(sys.stdin)
    failures = [{"name": c["name"], "problems": p} for c in cases if (p := problems_of(c))]
    json.dump({"checked": len(cases), "failures": failures}, sys.stdout)


if __name__ == "__main__":
    main()

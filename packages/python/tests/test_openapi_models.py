"""The SDK's models and request bodies against the engine's OpenAPI document (packages/client/openapi.json).

A renamed or removed property, a new required one, or a request field the engine no longer takes fails here, so
the SDK cannot drift from the API unnoticed (`npm run client:generate` refreshes the document).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from switchyard import _core as c
from switchyard import _verbs as v
from switchyard import models

DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / "client" / "openapi.json").read_text())
SCHEMAS: dict[str, Any] = DOCUMENT["components"]["schemas"]

# Models of answers the document does not describe as a schema of their own (none today).
UNDESCRIBED: set[str] = set()


def resolve(name: str) -> dict[str, Any]:
    """`Schema`, or `Schema#prop`: the schema of the items of its array property `prop`."""
    schema_name, _, prop = name.partition("#")
    schema = SCHEMAS[schema_name]
    return schema["properties"][prop]["items"] if prop else schema


def api_models() -> list[type[Any]]:
    return [
        cls
        for _, cls in inspect.getmembers(models, inspect.isclass)
        if dataclasses.is_dataclass(cls) and any("api" in f.metadata for f in dataclasses.fields(cls))
    ]


def test_every_model_reading_the_api_names_its_schema() -> None:
    named = {cls.__name__ for cls in api_models() if getattr(cls, "__schema__", None)}
    assert {cls.__name__ for cls in api_models()} - named == UNDESCRIBED
    assert len(named) >= 10


@pytest.mark.parametrize(
    "cls", [cls for cls in api_models() if getattr(cls, "__schema__", None)], ids=lambda c: c.__name__
)
def test_fields_match_the_schema(cls: type[Any]) -> None:
    schema = resolve(cls.__schema__)
    properties = set(schema["properties"])
    fields = {f.metadata["api"] for f in dataclasses.fields(cls) if "api" in f.metadata}
    assert sorted(fields - properties) == [], f"{cls.__name__} reads properties {cls.__schema__} does not have"
    missing = set(schema.get("required", [])) - fields
    assert sorted(missing) == [], f"{cls.__name__} has no field for required properties of {cls.__schema__}"
    # Every property is read: a new one the engine answers shows up here, to be added (it is in `raw` meanwhile).
    assert sorted(properties - fields) == [], f"{cls.__name__} lacks fields for {cls.__schema__}'s properties"


def body_keys(call: c.Call[Any]) -> set[str]:
    return set(json.loads(call.content() or b"{}"))


def request_properties(name: str) -> set[str]:
    return set(SCHEMAS[name]["properties"])


def test_request_bodies_use_the_engine_field_names() -> None:
    session = c.create_session(
        template="data-science", metadata={}, ttl_seconds=1, policy={}, network={"allow": []}, max_concurrent_actions=1
    )
    assert body_keys(session) == request_properties("CreateSessionDto")
    code = c.code_action("x", "python", "session", 1, {"A": "1"}, None, "auto")
    assert set(code) <= request_properties("CodeActionDto")
    start = v.process_start_action("x", "d", {"A": "1"}, "n")
    assert set(start) <= request_properties("ProcessStartDto")
    for op, dto in [
        ("wait", "ProcessWaitDto"),
        ("stop", "ProcessStopDto"),
        ("logs", "ProcessLogsDto"),
        ("signal", "ProcessSignalDto"),
        ("write", "ProcessWriteDto"),
    ]:
        fields = {"wait": {"timeout_ms": 1}, "stop": {"grace_ms": 1}, "logs": {"tail": 1}, "signal": {"signal": "TERM"}}
        action = v.process_action(op, "prc_1", **fields.get(op, {"data": "x", "eof": True}))
        assert set(action) <= request_properties(dto), op
    retry = c.retry_action("s", "a", action={}, reason="r", escalate=True, restore=True, wait=True, checkpoint="before")
    assert body_keys(retry) == request_properties("RetryActionDto")
    assert body_keys(c.create_checkpoint("s", "l")) == request_properties("CreateCheckpointDto")
    assert body_keys(c.fork_session("s", "chk")) == request_properties("ForkSessionDto")
    assert set(c.file_action("list", "d", recursive=True, cursor="x")) <= request_properties("FileListDto")
    assert set(c.file_action("move", "a", to="b", overwrite=True)) <= request_properties("FileMoveDto")
    assert set(c.file_action("delete", "a", recursive=True)) <= request_properties("FileDeleteDto")


def test_every_path_of_the_api_is_reached() -> None:
    """Each operation of the document has a request builder here (the Jupyter protocol and metrics aside)."""
    source = Path(c.__file__).read_text() + Path(c.__file__).with_name("client.py").read_text()
    uncovered = []
    for path in DOCUMENT["paths"]:
        if "/jupyter/" in path or path in ("/metrics", "/health/live", "/health/ready"):
            continue
        tail = path.rstrip("/").rsplit("/", 1)[-1]
        if tail.startswith("{"):
            tail = path.rstrip("/").rsplit("/", 2)[-2]
        if f"/{tail}" not in source and f'"{tail}"' not in source:
            uncovered.append(path)
    assert uncovered == []

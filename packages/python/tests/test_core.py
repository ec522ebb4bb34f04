"""Requests as data: what each verb sends, checked without a network."""

from __future__ import annotations

import json

import pytest

from switchyard import _core as c
from switchyard import _verbs as v
from switchyard import models as m


def test_settings_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWITCHYARD_URL", raising=False)
    monkeypatch.delenv("SWITCHYARD_API_KEY", raising=False)
    assert c.resolve_settings(None, None) == ("http://127.0.0.1:8080", None)
    monkeypatch.setenv("SWITCHYARD_URL", "http://env:1/")
    monkeypatch.setenv("SWITCHYARD_API_KEY", "k-env")
    assert c.resolve_settings(None, None) == ("http://env:1", "k-env")
    assert c.resolve_settings("http://arg:2", "k-arg") == ("http://arg:2", "k-arg")


def test_create_session_sends_camel_case_and_leaves_out_absent_fields() -> None:
    call = c.create_session(template="data-science", ttl_seconds=60, metadata={"a": 1})
    assert (call.method, call.path) == ("POST", "/v1/sessions")
    assert json.loads(call.content() or b"") == {"template": "data-science", "ttlSeconds": 60, "metadata": {"a": 1}}
    assert call.all_headers() == {"content-type": "application/json"}
    assert call.parse({"id": "ses_1", "ttlSeconds": 60}).ttl_seconds == 60


def test_path_segments_are_encoded() -> None:
    assert c.get_action("ses/1", "act 2").path == "/v1/sessions/ses%2F1/actions/act%202"


def test_query_drops_absent_values_and_spells_booleans() -> None:
    call = c.list_tools("openai", True, None)
    assert call.params() == {"format": "openai", "strict": "true"}
    assert call.content() is None


def test_run_action_options() -> None:
    call = c.run_action("s", {"type": "code"}, wait=False, checkpoint="before", idempotency_key="k1")
    assert json.loads(call.content() or b"") == {"type": "code", "wait": False, "checkpoint": "before"}
    assert call.all_headers()["idempotency-key"] == "k1"


def test_code_action_and_commands() -> None:
    assert c.code_action("print(1)", "python", "session", 5000) == {
        "type": "code",
        "language": "python",
        "code": "print(1)",
        "state": "session",
        "timeoutMs": 5000,
    }
    action = v.command_action("ls", "sub dir", {"A": "1"}, None)
    assert action["code"] == "cd -- 'sub dir' && ls"
    assert action["env"] == {"A": "1"} and action["language"] == "bash" and "state" not in action
    assert c.shell_quote("it's") == "'it'\\''s'"
    assert v.process_start_action("sleep 1", None, None, "web") == {
        "type": "process",
        "op": "start",
        "command": "sleep 1",
        "name": "web",
    }
    assert v.process_action("stop", "prc_1", grace_ms=0) == {
        "type": "process",
        "op": "stop",
        "processId": "prc_1",
        "graceMs": 0,
    }


def test_decode_answers_json_text_or_none() -> None:
    assert c.decode(200, b'{"a": 1}') == {"a": 1}
    assert c.decode(200, b"plain") == "plain"
    assert c.decode(204, b"") is None
    assert c.query_params({"a": None}) is None and c.query_params({"a": 1, "b": None}) == {"a": 1}


def test_execution_from_a_cell() -> None:
    action = m.Action.from_api(
        {
            "id": "act_1",
            "status": "succeeded",
            "stdout": "hi\n",
            "stderr": "",
            "output": {
                "kernel": {"id": "krn_1"},
                "result": "2",
                "results": [
                    {"data": {"text/plain": "2", "application/json": {"x": 1}}, "isMainResult": True},
                    {"data": {"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="}},
                    {"data": {"text/html": "<b>shown</b>"}},
                ],
            },
        }
    )
    ex = m.Execution.from_action(action)
    assert ex.results[0].png == "iVBORw0KGgo=" and ex.results[0].text == "<Figure>"
    assert ex.results[0].formats() == ["text/plain", "image/png"]
    # Displayed results first, in their order; the main result (sent first by the kernel) last.
    assert ex.results[1].html == "<b>shown</b>"
    assert ex.results[2].json == {"x": 1} and ex.results[2].is_main_result
    assert ex.text == "2" and ex.logs.stdout == "hi\n" and ex.error is None


def test_execution_error_from_a_traceback_and_from_the_engine() -> None:
    failed = m.Action.from_api(
        {"status": "failed", "stderr": 'Traceback…\n  File "<cell 1>"\nZeroDivisionError: division by zero\n'}
    )
    error = m.Execution.from_action(failed).error
    assert error is not None and (error.name, error.value) == ("ZeroDivisionError", "division by zero")
    timed_out = m.Action.from_api(
        {"status": "timed_out", "error": {"class": "timeout", "code": "TIMEOUT", "message": "ran past 10 ms"}}
    )
    error = m.Execution.from_action(timed_out).error
    assert error is not None and (error.name, error.value) == ("TIMEOUT", "ran past 10 ms")
    assert m.Execution.from_action(m.Action.from_api({"status": "succeeded"})).text is None


def test_a_failed_verb_raises_the_typed_error() -> None:
    from switchyard import ActionFailedError, ConflictError, DeniedError, NotFoundError

    with pytest.raises(NotFoundError) as nf:
        v.check(m.Action.from_api({"status": "failed", "type": "file", "error": {"code": "ENOENT", "message": "no"}}))
    assert nf.value.code == "ENOENT" and nf.value.status == 404
    with pytest.raises(ConflictError):
        v.check(m.Action.from_api({"status": "failed", "error": {"code": "EEXIST", "message": "there"}}))
    with pytest.raises(DeniedError):
        v.check(m.Action.from_api({"status": "denied", "error": {"class": "policy", "message": "no"}}))
    with pytest.raises(ActionFailedError) as other:
        v.check(m.Action.from_api({"status": "failed", "stderr": "boom\n"}))
    assert other.value.message == "boom" and other.value.action.status == "failed"

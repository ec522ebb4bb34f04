"""What the sync and async clients share: settings, and every request as data (`Call`) with its answer's parser.

Neither client builds a URL, a body or a model itself: each turns a `Call` into one HTTP exchange (its own I/O) and
hands the JSON answer to `call.parse`. So the two cannot drift apart, and this module is tested without a network.
"""

from __future__ import annotations

import json as jsonlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from . import models as m
from .errors import error_from_response

DEFAULT_URL = "http://127.0.0.1:8080"

_T = TypeVar("_T")

ToolFormat = Literal["openai", "anthropic", "openai-responses"]
ReadFormat = Literal["text", "bytes", "stream"]


def resolve_settings(base_url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """By precedence: the argument > the environment (SWITCHYARD_URL, SWITCHYARD_API_KEY) > the default."""
    url = base_url or os.environ.get("SWITCHYARD_URL") or DEFAULT_URL
    key = api_key if api_key is not None else (os.environ.get("SWITCHYARD_API_KEY") or None)
    return url.rstrip("/"), key


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


def query_params(query: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The query without absent values; None when nothing is left, so httpx does not re-parse the URL to merge it."""
    params = {k: v for k, v in (query or {}).items() if v is not None}
    return params or None


def _identity(body: Any) -> Any:
    return body


@dataclass(frozen=True)
class Call(Generic[_T]):
    """One request: method, path (already encoded), query, JSON body, headers, and how to read its answer."""

    method: str
    path: str
    query: Mapping[str, Any] | None = None
    json: Any = None
    has_body: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    parse: Callable[[Any], _T] = _identity

    def params(self) -> dict[str, str]:
        """The query without absent values; booleans as the engine reads them."""
        out: dict[str, str] = {}
        for key, value in (self.query or {}).items():
            if value is None:
                continue
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    def content(self) -> bytes | None:
        return jsonlib.dumps(self.json).encode() if self.has_body else None

    def all_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.has_body:
            headers["content-type"] = "application/json"
        return headers


def decode(status: int, content: bytes) -> Any:
    """An answer's body: its JSON, the text when it is not JSON, None when empty. Non-2xx raises the typed error.

    Read from the bytes (JSON is UTF-8): no charset sniffing on every answer.
    """
    body: Any = None
    if content:
        try:
            body = jsonlib.loads(content)
        except ValueError:
            body = content.decode("utf-8", "replace")
    if status >= 400:
        raise error_from_response(status, body)
    return body


def enc(segment: str) -> str:
    return quote(str(segment), safe="")


def session_path(session_id: str) -> str:
    return f"/v1/sessions/{enc(session_id)}"


_CAMEL = re.compile(r"_([a-z])")


def camel(name: str) -> str:
    """`timeout_ms` → `timeoutMs`: Python keyword arguments to the API's field names."""
    return _CAMEL.sub(lambda mt: mt.group(1).upper(), name)


def camel_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments as API fields, absent (None) ones left out."""
    return {camel(k): v for k, v in fields.items() if v is not None}


def _get(call_path: str, parse: Callable[[Any], _T] = _identity, **query: Any) -> Call[_T]:
    return Call("GET", call_path, query=query, parse=parse)


def _send(
    method: str,
    call_path: str,
    body: Any = None,
    parse: Callable[[Any], _T] = _identity,
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, Any] | None = None,
) -> Call[_T]:
    return Call(
        method, call_path, query=query, json=body, has_body=body is not None, headers=headers or {}, parse=parse
    )


def _list(key: str, parse: Callable[[Any], _T]) -> Callable[[Any], list[_T]]:
    return lambda body: [parse(x) for x in (body or {}).get(key, [])]


def _none(_body: Any) -> None:
    return None


def _idempotency(key: str | None) -> dict[str, str]:
    return {"idempotency-key": key} if key else {}


# ---- sessions ----


def create_session(
    *,
    template: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    ttl_seconds: int | None = None,
    policy: Mapping[str, Any] | None = None,
    network: Mapping[str, Any] | None = None,
    max_concurrent_actions: int | None = None,
) -> Call[m.Session]:
    body = camel_fields(
        {
            "template": template,
            "metadata": dict(metadata) if metadata is not None else None,
            "ttl_seconds": ttl_seconds,
            "policy": dict(policy) if policy is not None else None,
            "network": dict(network) if network is not None else None,
            "max_concurrent_actions": max_concurrent_actions,
        }
    )
    return _send("POST", "/v1/sessions", body, m.Session.from_api)


def get_session(session_id: str) -> Call[m.Session]:
    return _get(session_path(session_id), m.Session.from_api)


def list_sessions() -> Call[list[m.Session]]:
    return _get("/v1/sessions", _list("sessions", m.Session.from_api))


def delete_session(session_id: str) -> Call[None]:
    return _send("DELETE", session_path(session_id), parse=_none)


def fork_session(
    session_id: str, checkpoint_id: str | None = None, idempotency_key: str | None = None
) -> Call[m.Session]:
    body = camel_fields({"checkpoint_id": checkpoint_id})
    return _send("POST", f"{session_path(session_id)}/fork", body, m.Session.from_api, _idempotency(idempotency_key))


def list_templates() -> Call[list[m.Template]]:
    return _get("/v1/templates", _list("templates", m.Template.from_api))


# ---- actions ----


def run_action(
    session_id: str,
    action: Mapping[str, Any],
    *,
    wait: bool = True,
    checkpoint: Literal["before"] | None = None,
    idempotency_key: str | None = None,
) -> Call[m.Action]:
    body = dict(action)
    if not wait:
        body["wait"] = False
    if checkpoint:
        body["checkpoint"] = checkpoint
    return _send("POST", f"{session_path(session_id)}/actions", body, m.Action.from_api, _idempotency(idempotency_key))


def get_action(session_id: str, action_id: str) -> Call[m.Action]:
    return _get(f"{session_path(session_id)}/actions/{enc(action_id)}", m.Action.from_api)


def list_actions(session_id: str, cursor: str | None = None, limit: int | None = None) -> Call[m.ActionPage]:
    return _get(f"{session_path(session_id)}/actions", m.ActionPage.from_api, cursor=cursor, limit=limit)


def cancel_action(session_id: str, action_id: str) -> Call[m.Action]:
    return _send("POST", f"{session_path(session_id)}/actions/{enc(action_id)}/cancel", parse=m.Action.from_api)


def retry_action(
    session_id: str,
    action_id: str,
    *,
    action: Mapping[str, Any] | None = None,
    reason: str | None = None,
    escalate: bool | None = None,
    restore: bool | None = None,
    wait: bool | None = None,
    checkpoint: Literal["before"] | None = None,
    idempotency_key: str | None = None,
) -> Call[m.Action]:
    body = camel_fields(
        {
            "action": dict(action) if action is not None else None,
            "reason": reason,
            "escalate": escalate,
            "restore": restore,
            "wait": wait,
            "checkpoint": checkpoint,
        }
    )
    return _send(
        "POST",
        f"{session_path(session_id)}/actions/{enc(action_id)}/retry",
        body,
        m.Action.from_api,
        _idempotency(idempotency_key),
    )


def action_context(session_id: str, action_id: str, before: int | None = None) -> Call[dict[str, Any]]:
    return _get(f"{session_path(session_id)}/actions/{enc(action_id)}/context", before=before)


def code_action(
    code: str,
    language: str,
    state: str | None,
    timeout_ms: int | None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    tier: str | None = None,
) -> dict[str, Any]:
    return {
        "type": "code",
        "language": language,
        "code": code,
        **camel_fields(
            {"state": state, "timeout_ms": timeout_ms, "env": dict(env) if env else None, "stdin": stdin, "tier": tier}
        ),
    }


def shell_command(cmd: str, cwd: str | None) -> str:
    """A command run from `cwd` (relative to the workspace) when one is given."""
    if not cwd:
        return cmd
    return f"cd -- {shell_quote(cwd)} && {cmd}"


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# ---- files ----


def file_action(op: str, path: str | None = None, **fields: Any) -> dict[str, Any]:
    action: dict[str, Any] = {"type": "file", "op": op, **camel_fields(fields)}
    if path is not None:
        action["path"] = path
    return action


def files_content_path(session_id: str) -> str:
    return f"{session_path(session_id)}/files/content"


def files_archive_path(session_id: str) -> str:
    return f"{session_path(session_id)}/files/archive"


def file_lineage(session_id: str, path: str) -> Call[dict[str, Any]]:
    return _get(f"{session_path(session_id)}/files/lineage", path=path)


def entries(action: m.Action) -> list[m.EntryInfo]:
    output = action.output if isinstance(action.output, dict) else {}
    return [m.EntryInfo.from_api(e) for e in output.get("entries") or []]


# ---- checkpoints ----


def create_checkpoint(
    session_id: str, label: str | None = None, idempotency_key: str | None = None
) -> Call[m.Checkpoint]:
    body = camel_fields({"label": label})
    return _send(
        "POST", f"{session_path(session_id)}/checkpoints", body, m.Checkpoint.from_api, _idempotency(idempotency_key)
    )


def list_checkpoints(session_id: str) -> Call[list[m.Checkpoint]]:
    return _get(f"{session_path(session_id)}/checkpoints", _list("checkpoints", m.Checkpoint.from_api))


def get_checkpoint(session_id: str, checkpoint_id: str) -> Call[m.Checkpoint]:
    return _get(f"{session_path(session_id)}/checkpoints/{enc(checkpoint_id)}", m.Checkpoint.from_api)


def delete_checkpoint(session_id: str, checkpoint_id: str) -> Call[None]:
    return _send("DELETE", f"{session_path(session_id)}/checkpoints/{enc(checkpoint_id)}", parse=_none)


def restore_checkpoint(session_id: str, checkpoint_id: str) -> Call[m.CheckpointRestore]:
    return _send(
        "POST",
        f"{session_path(session_id)}/checkpoints/{enc(checkpoint_id)}/restore",
        parse=m.CheckpointRestore.from_api,
    )


def diff_checkpoint(session_id: str, checkpoint_id: str, to: str = "current") -> Call[dict[str, Any]]:
    return _get(f"{session_path(session_id)}/checkpoints/{enc(checkpoint_id)}/diff", to=to)


def checkpoint_id(checkpoint: m.Checkpoint | str) -> str:
    return checkpoint.id if isinstance(checkpoint, m.Checkpoint) else checkpoint


# ---- kernels ----


def list_kernels(session_id: str) -> Call[list[m.Kernel]]:
    return _get(f"{session_path(session_id)}/kernels", _list("kernels", m.Kernel.from_api))


def get_kernel(session_id: str, kernel_id: str) -> Call[m.Kernel]:
    return _get(f"{session_path(session_id)}/kernels/{enc(kernel_id)}", m.Kernel.from_api)


def interrupt_kernel(session_id: str, kernel_id: str) -> Call[dict[str, Any]]:
    return _send("POST", f"{session_path(session_id)}/kernels/{enc(kernel_id)}/interrupt")


def restart_kernel(session_id: str, kernel_id: str) -> Call[m.Kernel]:
    return _send("POST", f"{session_path(session_id)}/kernels/{enc(kernel_id)}/restart", parse=m.Kernel.from_api)


def delete_kernel(session_id: str, kernel_id: str) -> Call[None]:
    return _send("DELETE", f"{session_path(session_id)}/kernels/{enc(kernel_id)}", parse=_none)


# ---- ports and the browser view ----


def list_ports(session_id: str) -> Call[list[dict[str, Any]]]:
    """The session's listening ports: `{port, address, tier, process, kernel, url, host?}` each (docs/ports.md)."""
    return _get(f"{session_path(session_id)}/ports", _list("ports", _identity))


def preview_port(session_id: str, port: int, ttl_seconds: int | None = None) -> Call[dict[str, Any]]:
    """`{url, token, expiresAt, host?}`: a link a browser opens without the key (docs/ports.md)."""
    body = {} if ttl_seconds is None else {"ttlSeconds": ttl_seconds}
    return _send("POST", f"{session_path(session_id)}/ports/{int(port)}/preview", body)


def port_path(session_id: str, port: int, path: str = "") -> str:
    """Where the engine proxies `path` of the session's server on `port` (any method; docs/ports.md)."""
    return f"{session_path(session_id)}/ports/{int(port)}/{path.lstrip('/')}"


def browser_view_path(session_id: str) -> str:
    """`GET`: the session's current browser tab as a JPEG (`x-switchyard-page-url`, …), not recorded."""
    return f"{session_path(session_id)}/browser/view"


# ---- terminals ----


def open_terminal(
    session_id: str,
    *,
    cols: int | None = None,
    rows: int | None = None,
    cwd: str | None = None,
    command: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Call[dict[str, Any]]:
    """The terminal and a token for its WebSocket (201), or `status: "awaiting_approval"` (202) when a policy asks."""
    body = {"cols": cols, "rows": rows, "cwd": cwd, "command": command, "env": dict(env) if env is not None else None}
    return _send("POST", f"{session_path(session_id)}/terminals", {k: v for k, v in body.items() if v is not None})


def list_terminals(session_id: str) -> Call[list[m.Terminal]]:
    return _get(f"{session_path(session_id)}/terminals", _list("terminals", m.Terminal.from_api))


def get_terminal(session_id: str, terminal_id: str) -> Call[m.Terminal]:
    return _get(f"{session_path(session_id)}/terminals/{enc(terminal_id)}", m.Terminal.from_api)


def resize_terminal(session_id: str, terminal_id: str, cols: int, rows: int) -> Call[m.Terminal]:
    return _send(
        "POST",
        f"{session_path(session_id)}/terminals/{enc(terminal_id)}/resize",
        {"cols": cols, "rows": rows},
        parse=m.Terminal.from_api,
    )


def terminal_token(session_id: str, terminal_id: str, ttl_seconds: int | None = None) -> Call[dict[str, Any]]:
    """`{token, expiresAt, wsPath}`: opens the terminal's WebSocket (`?token=`) without the key."""
    body = {} if ttl_seconds is None else {"ttlSeconds": ttl_seconds}
    return _send("POST", f"{session_path(session_id)}/terminals/{enc(terminal_id)}/token", body)


def close_terminal(session_id: str, terminal_id: str) -> Call[dict[str, Any]]:
    return _send("DELETE", f"{session_path(session_id)}/terminals/{enc(terminal_id)}")


# ---- plans ----

FINAL_PLAN = frozenset({"succeeded", "needs_replan", "cancelled", "interrupted"})


def create_plan(session_id: str, plan: Mapping[str, Any], idempotency_key: str | None = None) -> Call[m.Plan]:
    return _send(
        "POST", f"{session_path(session_id)}/plans", dict(plan), m.Plan.from_api, _idempotency(idempotency_key)
    )


def get_plan(session_id: str, plan_id: str) -> Call[m.Plan]:
    return _get(f"{session_path(session_id)}/plans/{enc(plan_id)}", m.Plan.from_api)


def list_plans(session_id: str) -> Call[list[m.Plan]]:
    return _get(f"{session_path(session_id)}/plans", _list("plans", m.Plan.from_api))


def replan(session_id: str, plan_id: str, body: Mapping[str, Any]) -> Call[m.Plan]:
    return _send("POST", f"{session_path(session_id)}/plans/{enc(plan_id)}/replan", dict(body), m.Plan.from_api)


def cancel_plan(session_id: str, plan_id: str) -> Call[m.Plan]:
    return _send("POST", f"{session_path(session_id)}/plans/{enc(plan_id)}/cancel", parse=m.Plan.from_api)


# ---- tools ----


def list_tools(
    format: ToolFormat | None = None, strict: bool | None = None, session_id: str | None = None
) -> Call[list[dict[str, Any]]]:
    return _get(
        "/v1/tools",
        lambda body: list((body or {}).get("tools", [])),
        format=format,
        strict=strict,
        sessionId=session_id,
    )


def call_tools(session_id: str, calls: Any) -> Call[Any]:
    return _send("POST", f"{session_path(session_id)}/tool-calls", calls)


# ---- graph, policies, approvals, skills, hooks, health ----


def graph(
    session_id: str,
    types: list[str] | None = None,
    status: list[str] | None = None,
    since: str | None = None,
    limit: int | None = None,
) -> Call[dict[str, Any]]:
    return _get(
        f"{session_path(session_id)}/graph",
        types=",".join(types) if types else None,
        status=",".join(status) if status else None,
        since=since,
        limit=limit,
    )


def whoami() -> Call[dict[str, Any]]:
    return _get("/v1/whoami")


def session_policy(session_id: str) -> Call[dict[str, Any]]:
    return _get(f"{session_path(session_id)}/policy")


def tenant_policy(tenant: str) -> Call[dict[str, Any]]:
    return _get(f"/v1/tenants/{enc(tenant)}/policy")


def set_tenant_policy(tenant: str, policy: Mapping[str, Any]) -> Call[dict[str, Any]]:
    return _send("PUT", f"/v1/tenants/{enc(tenant)}/policy", dict(policy))


def delete_tenant_policy(tenant: str) -> Call[None]:
    return _send("DELETE", f"/v1/tenants/{enc(tenant)}/policy", parse=_none)


def list_approvals() -> Call[list[dict[str, Any]]]:
    return _get("/v1/approvals", lambda body: list((body or {}).get("approvals", [])))


def decide_approval(session_id: str, action_id: str, approve: bool, reason: str | None = None) -> Call[dict[str, Any]]:
    verb = "approve" if approve else "reject"
    return _send(
        "POST", f"{session_path(session_id)}/actions/{enc(action_id)}/{verb}", camel_fields({"reason": reason})
    )


def list_skills() -> Call[list[dict[str, Any]]]:
    return _get("/v1/skills", lambda body: list((body or {}).get("skills", [])))


def get_skill(name: str) -> Call[dict[str, Any]]:
    return _get(f"/v1/skills/{enc(name)}")


def add_skill(skill: Mapping[str, Any]) -> Call[dict[str, Any]]:
    return _send("POST", "/v1/skills", dict(skill))


def delete_skill(name: str) -> Call[None]:
    return _send("DELETE", f"/v1/skills/{enc(name)}", parse=_none)


def list_hooks() -> Call[dict[str, Any]]:
    return _get("/v1/hooks")


def hook_deliveries(limit: int | None = None) -> Call[list[dict[str, Any]]]:
    return _get("/v1/hooks/deliveries", lambda body: list((body or {}).get("deliveries", [])), limit=limit)


def action_hooks(session_id: str, action_id: str) -> Call[list[dict[str, Any]]]:
    return _get(
        f"{session_path(session_id)}/actions/{enc(action_id)}/hooks",
        lambda body: list((body or {}).get("deliveries", [])),
    )


def health() -> Call[dict[str, Any]]:
    return _get("/health")


# ---- events ----


def event_headers(api_key: str | None, last_event_id: str | None) -> dict[str, str]:
    headers = {**auth_headers(api_key), "accept": "text/event-stream"}
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    return headers


def output_of(action: m.Action) -> dict[str, Any]:
    """An action's `output` as a dict (empty when it has none)."""
    return action.output if isinstance(action.output, dict) else {}

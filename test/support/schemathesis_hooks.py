"""Schemathesis hooks of the contract test (test/e2e/contract.e2e-spec.ts), loaded with SCHEMATHESIS_HOOKS.

The document is OpenAPI 3.0, which cannot state some rules of the API that its descriptions and docs/api.md state in
words. Requests that break them are refused by design (400, or 422 for a reused key), so generating them as "valid"
would only report the document's limits. These hooks keep Schemathesis to requests the document means:
- no `__proto__`, `constructor` or `prototype` key anywhere in a body (refused with 400 FORBIDDEN_KEY; OpenAPI 3.0
  has no `propertyNames` to say so inside free-form objects such as `metadata` or a tool call's `input`);
- `GET /v1/tools`: `strict=true` only with `format=openai` or `openai-responses` (a rule between two parameters);
- a retry's `escalate: true` only with a code `action` when it revises one (a rule between two fields);
- a plan's steps form a DAG: unique ids, `dependsOn` naming steps of the same request, no cycle (a rule between
  array items);
- `env` keys are variable names (`^[A-Za-z_][A-Za-z0-9_]*$`), none the sandbox refuses (`LD_*`, `PATH`… as
  libs/sandbox/src/core/env-policy.ts lists them), values without NUL (a rule on an object's keys);
- workspace paths (`path`, `to`, `cwd`) are relative, stay inside the workspace, and hold no backslash, percent
  sign, control, format or other invisible character (the path guard's rules, stated in docs/api.md; OpenAPI 3.0
  patterns cannot name Unicode categories);
- policy patterns are plain strings or globs: a `/regex/` pattern must compile (and not nest quantifiers) and a
  `>=level` risk pattern must name a level, rules of a string's content the schema leaves to docs/api.md;
- a skill's `inputSchema` and `outputSchema` are JSON Schemas (a meta-schema OpenAPI 3.0 cannot refer to): before a
  skill is sent, what was generated in them is kept to their `type`;
- an `Idempotency-Key` is not reused for another request: a valid key gets a unique suffix (its reuse with another
  body is the documented 422, which a generator picking short random keys would hit by chance).
`filter_case` applies in every phase (coverage included). Everything else is sent as generated, except that waits
are kept inside the run's time budget: a plan's `waitTimeoutMs` at most 10 s, set when `wait` is true without one
(it then answers 202, as documented)
and a process `wait`'s `timeoutMs` at most 5 s, when larger valid values were generated.

One check is narrowed, not skipped: `ensure_resource_availability` (ST302) takes any 404 right after a create for
the created resource. A 404 about something else that the request's body names is not about it: an action naming
a skill the tenant does not have (`UNKNOWN_SKILL`, field `name`), a file or process the new session does not have,
a fork naming a checkpoint it does not have (`CHECKPOINT_NOT_FOUND`). Such a 404 names that body field in its
`fields` (or is the fork's checkpoint); those failures are dropped, every other ST302 stays (a 404 for the created
session itself names no field).
"""

import json
import re
import unicodedata
import uuid

import hypothesis
import hypothesis.internal.filtering as hypothesis_filtering
import hypothesis.internal.lambda_sources as lambda_sources
import schemathesis

# Schemathesis feeds Hypothesis a "success rate" target while fuzzing, and Hypothesis' optimiser for targets
# (hypothesis 6.170.17) can crash on it: IndexError "Index 51 out of range [-32, 32)" in optimiser.attempt_replace,
# reported by Schemathesis as a Runtime Error of the run. Targets only steer generation toward accepted inputs;
# without them Hypothesis skips that pass and generates as before, so the run stays as thorough and cannot crash so.
hypothesis.target = lambda observation, *, label="": observation

# Hypothesis describes a lambda by parsing its source (`ast.parse`), including while it prints a strategy's repr
# during generation; deep inside a recursive strategy, CPython 3.11.7's parser can raise "SystemError: AST constructor
# recursion depth mismatch" there (CPython gh-106905, fixed in 3.11.8), which Schemathesis reports as a Runtime Error
# of the run (seed 965129055 met it). A description is only a label: the lambda's generic name stands in for it.
_lambda_description = lambda_sources.lambda_description


def _safe_lambda_description(f, *args, **kwargs):
    try:
        return _lambda_description(f, *args, **kwargs)
    except SystemError:
        return "lambda: <source not parsed>"


lambda_sources.lambda_description = _safe_lambda_description
hypothesis_filtering.lambda_description = _safe_lambda_description

FORBIDDEN_KEYS = {"__proto__", "constructor", "prototype"}
IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
ENV_DENIED = {
    "PATH",
    "HOME",
    "ENV",
    "BASHOPTS",
    "SHELLOPTS",
    "IFS",
    "PS4",
    "CDPATH",
    "GLOBIGNORE",
    "PROMPT_COMMAND",
    "GLIBC_TUNABLES",
    "GCONV_PATH",
    "LOCPATH",
    "HOSTALIASES",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
}
ENV_ALLOWED = {
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONHASHSEED",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONFAULTHANDLER",
    "NODE_ENV",
    "NODE_NO_WARNINGS",
}
PATH_KEYS = {"path", "to", "cwd"}
# Default_Ignorable_Code_Point beyond the format characters (Cf): what the path guard also refuses.
IGNORABLE = [
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0000, 0xE0FFF),
]


def _has_forbidden_key(value):
    if isinstance(value, dict):
        return any(key in FORBIDDEN_KEYS or _has_forbidden_key(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_forbidden_key(item) for item in value)
    return False


def _is_dag(steps):
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        return True  # not this rule's business: the schema says what a step list is
    ids = [step.get("id") for step in steps]
    if len(set(map(repr, ids))) != len(ids):
        return False
    deps = {repr(step.get("id")): step.get("dependsOn") or [] for step in steps}
    if any(
        not isinstance(d, list) or any(repr(x) not in deps or x == step for x in d)
        for step, d in ((s.get("id"), deps[repr(s.get("id"))]) for s in steps)
    ):
        return False
    state = {}

    def cyclic(node):
        if state.get(node) == 1:
            return True
        if state.get(node) == 2:
            return False
        state[node] = 1
        found = any(cyclic(repr(dep)) for dep in deps[node])
        state[node] = 2
        return found

    return not any(cyclic(node) for node in deps)


def _env_refused(key, value):
    upper = key.upper()
    if not ENV_KEY.match(key) or (isinstance(value, str) and "\0" in value):
        return True
    if upper in ENV_ALLOWED:
        return False
    return upper in ENV_DENIED or upper.startswith(("LD_", "DYLD_", "BASH_", "PYTHON", "NODE_"))


def _path_refused(text):
    """Whether libs/workspace/src/path-guard.ts refuses `text` for its content (not for what is on disk)."""
    if "\\" in text or text.startswith("/") or "%" in text or len(text.encode("utf-8", "surrogatepass")) > 4096:
        return True  # backslash, absolute, percent-encoding (the guard decodes it, conservatively), too long
    depth = 0
    for segment in text.split("/"):
        if len(segment.encode("utf-8", "surrogatepass")) > 255:
            return True
        if segment == "..":
            depth -= 1
            if depth < 0:
                return True  # climbs out of the workspace
        elif segment not in ("", "."):
            depth += 1
    if depth == 0:
        return True  # the workspace root itself, which most operations refuse
    for ch in text:
        code = ord(ch)
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") or any(lo <= code <= hi for lo, hi in IGNORABLE):
            return True
    return False


def _policy_refused(policy):
    """A policy whose patterns the engine reads specially: `/regex/` and `>=level` (checked by rules of their own)."""
    rules = policy.get("rules") if isinstance(policy, dict) else None
    for rule in rules if isinstance(rules, list) else []:
        match = rule.get("match") if isinstance(rule, dict) else None
        for patterns in (match or {}).values() if isinstance(match, dict) else []:
            for pattern in patterns if isinstance(patterns, list) else [patterns]:
                if isinstance(pattern, str) and (re.match(r"^/.*/i?$", pattern, re.S) or pattern.startswith(">=")):
                    return True
    return False


SCHEMA_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


def _plain_schemas(body):
    """A skill's schemas, generated as free-form objects, kept to what a JSON Schema surely is: the input schema's
    `type` as generated (the document's one rule for it), the output schema's when it names a JSON type; anything
    else generated in them (keys that JSON Schema gives meanings the document cannot state) is dropped."""
    if not isinstance(body, dict):
        return
    schema = body.get("inputSchema")
    if isinstance(schema, dict):
        body["inputSchema"] = {"type": schema["type"]} if "type" in schema else {}
    schema = body.get("outputSchema")
    if isinstance(schema, dict):
        kind = schema.get("type")
        body["outputSchema"] = {"type": kind} if isinstance(kind, str) and kind in SCHEMA_TYPES else {}


def _breaks_a_named_rule(value):
    """An `env` or a workspace path anywhere in a body that the engine refuses by a rule the schema cannot state."""
    if isinstance(value, list):
        return any(_breaks_a_named_rule(item) for item in value)
    if not isinstance(value, dict):
        return False
    for key, item in value.items():
        if key == "env" and isinstance(item, dict) and any(_env_refused(k, v) for k, v in item.items()):
            return True
        if key in PATH_KEYS and isinstance(item, str) and _path_refused(item):
            return True
        if _breaks_a_named_rule(item):
            return True
    return False


@schemathesis.hook
def filter_case(ctx, case):
    if _has_forbidden_key(case.body) or _breaks_a_named_rule(case.body):
        return False
    path = case.operation.path
    query = case.query if isinstance(case.query, dict) else {}
    openai = ("openai", "openai-responses")
    if path == "/v1/tools" and query.get("strict") == "true" and query.get("format", "anthropic") not in openai:
        return False
    if path.endswith("/retry") and isinstance(case.body, dict) and case.body.get("escalate") is True:
        action = case.body.get("action")
        if isinstance(action, dict) and action.get("type") != "code":
            return False  # escalate only with a code action: a rule between two fields
    if path.endswith("/plans") or path.endswith("/replan"):
        body = case.body if isinstance(case.body, dict) else {}
        if not _is_dag(body.get("steps")):
            return False
    body = case.body if isinstance(case.body, dict) else {}
    if _policy_refused(body.get("policy")) or (path.endswith("/policy") and _policy_refused(body)):
        return False
    # The file transfer API names its workspace path in the query, by the same rules (an archive's may be the root).
    where = query.get("path")
    if path.endswith("/files/content") and isinstance(where, str) and _path_refused(where):
        return False
    if path.endswith("/files/archive") and isinstance(where, str) and _path_refused(f"{where}/x"):
        return False
    return True


PLAN_WAIT_MS = 10_000
PROCESS_WAIT_MS = 5_000


def _shorter_waits(body, path):
    if not isinstance(body, dict):
        return
    wait = body.get("waitTimeoutMs")
    if path.endswith("/plans") or path.endswith("/replan"):
        # Given, or absent (then 300 s) while `wait` holds the answer: a plan's retries and backoffs can take minutes.
        if (_int(wait) and wait > PLAN_WAIT_MS) or (body.get("wait") is True and wait is None):
            body["waitTimeoutMs"] = PLAN_WAIT_MS
    actions = [body, body.get("action")] + [s.get("action") for s in body.get("steps") or [] if isinstance(s, dict)]
    for action in actions:
        if isinstance(action, dict) and action.get("type") == "process" and action.get("op") == "wait":
            if _int(action.get("timeoutMs")) and action["timeoutMs"] > PROCESS_WAIT_MS:
                action["timeoutMs"] = PROCESS_WAIT_MS


def _int(value):
    return isinstance(value, int) and not isinstance(value, bool)


@schemathesis.hook
def before_call(ctx, case, kwargs):
    _shorter_waits(case.body, case.operation.path)
    if case.operation.path == "/v1/skills" and case.method.upper() == "POST":
        _plain_schemas(case.body)
    headers = case.headers
    key = headers.get("Idempotency-Key") if headers else None
    if isinstance(key, str) and IDEMPOTENCY_KEY.match(key):
        suffix = "-" + uuid.uuid4().hex
        headers["Idempotency-Key"] = key[: 255 - len(suffix)] + suffix


@schemathesis.hook
def filter_failure(ctx, failure, case, response):
    if failure.code not in ("ST302", "ST202"):
        return True
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return True
    if not isinstance(error, dict):
        return True
    if failure.code == "ST202":
        # An archive upload's body is bytes to the schema (`format: binary`): that they are no tar, it cannot say.
        return not (case.operation.path.endswith("/files/archive") and error.get("code") == "ARCHIVE_INVALID")
    if case.operation.path.endswith("/fork") and error.get("code") == "CHECKPOINT_NOT_FOUND":
        return False
    # A new session has no browser tab to look at until a browser action opens one: that 404 names it.
    if case.operation.path.endswith("/browser/view") and error.get("code") == "NO_BROWSER":
        return False
    return not _names_body_fields(error.get("fields"), case.body)


def _names_body_fields(fields, body):
    """Whether a 404's `fields` are all fields of the request's body: the 404 is then about what the body names."""
    if not isinstance(fields, list) or not fields or not isinstance(body, dict):
        return False
    for field in fields:
        path = field.get("path") if isinstance(field, dict) else None
        if not isinstance(path, str) or re.split(r"[.\[]", path, maxsplit=1)[0] not in body:
            return False
    return True

"""The one place errors are made: every refused request raises a subclass of `SwitchyardError`.

The class says what kind of refusal it is (by HTTP status), `code` is the engine's stable machine-readable code
(`NOT_FOUND`, `VALIDATION_FAILED`, `FILE_EXISTS`…), `fields` the parts of the request at fault. A request that never
reached the engine is a `ConnectionFailedError` (status 0, code `CONNECTION_FAILED`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Action


@dataclass(frozen=True)
class FieldError:
    """A part of a rejected request (a body field's dotted path, a query parameter or a header) and what is wrong."""

    path: str
    message: str


class SwitchyardError(Exception):
    """An answer the engine refused (non-2xx), or a request that never reached it (`status` 0)."""

    def __init__(
        self,
        message: str,
        status: int,
        code: str,
        fields: list[FieldError] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.fields: list[FieldError] = fields or []
        self.details: dict[str, Any] = details or {}

    @property
    def field(self) -> str | None:
        """The first field at fault, when the engine named one."""
        return self.fields[0].path if self.fields else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r}, message={self.message!r})"


class InvalidRequestError(SwitchyardError):
    """400: the request is malformed; `field` (and `fields`) name what to change."""


class AuthenticationError(SwitchyardError):
    """401: no API key, or an unknown one (set `api_key=` or SWITCHYARD_API_KEY)."""


class DeniedError(SwitchyardError):
    """403: a policy of the engine, the tenant or the session refused it."""


class NotFoundError(SwitchyardError):
    """404: no such session, action, checkpoint, kernel, plan or file (`FILE_NOT_FOUND`)."""


class ConflictError(SwitchyardError):
    """409: the state forbids it now (`FILE_EXISTS` with overwrite=False, an action that already ended…)."""


class PayloadTooLargeError(SwitchyardError):
    """413: past a size limit (the workspace quota, a body cap)."""


class RangeNotSatisfiableError(SwitchyardError):
    """416: a byte range outside the file."""


class UnprocessableError(SwitchyardError):
    """422: e.g. an idempotency key reused with another body."""


class RateLimitError(SwitchyardError):
    """429: too many queued actions; `retry_after` says when to try again."""

    @property
    def retry_after(self) -> float | None:
        value = self.details.get("retryAfterSeconds")
        return float(value) if isinstance(value, (int, float)) else None


class ServiceUnavailableError(SwitchyardError):
    """503: the engine (or what it needs: Docker, the graph store) cannot serve it now."""


class ActionFailedError(SwitchyardError):
    """A verb whose action did not succeed (a file, process or kernel op); `action` is its whole result.

    Verbs raise the typed class when the action's error says which (`NotFoundError` for `ENOENT`, `DeniedError` for a
    `denied` action…), with this one as its `__cause__`.
    """

    def __init__(self, message: str, status: int, code: str, action: Action) -> None:
        super().__init__(message, status, code)
        self.action = action


class ConnectionFailedError(SwitchyardError):
    """The engine could not be reached at the client's `base_url` (status 0, code `CONNECTION_FAILED`)."""


class WaitTimeoutError(SwitchyardError):
    """A client-side wait (an action, a plan, a background command) gave up (status 0, code `WAIT_TIMEOUT`)."""


_BY_STATUS: dict[int, type[SwitchyardError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: DeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    416: RangeNotSatisfiableError,
    422: UnprocessableError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def error_from_response(status: int, body: Any) -> SwitchyardError:
    """Reads the engine's error body (`{"error": {code, message, fields?, details?}}`) into the matching class.

    A body that is not that envelope (a proxy's HTML page) still gives an error naming the status.
    """
    cls = _BY_STATUS.get(status, SwitchyardError)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        text = body.strip()[:200] if isinstance(body, str) else ""
        return cls(f"HTTP {status}" + (f": {text}" if text else ""), status, f"HTTP_{status}")
    fields = [
        FieldError(str(f.get("path")), str(f.get("message"))) for f in error.get("fields") or [] if isinstance(f, dict)
    ]
    message = error.get("message")
    code = error.get("code")
    details = error.get("details")
    return cls(
        message if isinstance(message, str) else f"HTTP {status}",
        status,
        code if isinstance(code, str) else f"HTTP_{status}",
        fields,
        details if isinstance(details, dict) else None,
    )


def connection_error(base_url: str, cause: BaseException) -> ConnectionFailedError:
    return ConnectionFailedError(
        f"cannot reach the Switchyard engine at {base_url} ({cause}); is it running? "
        "Set SWITCHYARD_URL (or base_url=) to its address",
        0,
        "CONNECTION_FAILED",
    )

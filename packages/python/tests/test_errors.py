from __future__ import annotations

import pytest

from switchyard import errors as e


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, e.InvalidRequestError),
        (401, e.AuthenticationError),
        (403, e.DeniedError),
        (404, e.NotFoundError),
        (409, e.ConflictError),
        (413, e.PayloadTooLargeError),
        (416, e.RangeNotSatisfiableError),
        (422, e.UnprocessableError),
        (429, e.RateLimitError),
        (503, e.ServiceUnavailableError),
        (500, e.SwitchyardError),
    ],
)
def test_status_picks_the_class(status: int, cls: type[e.SwitchyardError]) -> None:
    error = e.error_from_response(status, {"error": {"code": "X", "message": "m"}})
    assert type(error) is cls and error.status == status and error.code == "X"


def test_fields_and_details_are_kept() -> None:
    error = e.error_from_response(
        400,
        {
            "error": {
                "code": "VALIDATION_FAILED",
                "message": "invalid request: language: must be one of python, node, bash",
                "fields": [{"path": "language", "message": "must be one of python, node, bash"}],
            }
        },
    )
    assert isinstance(error, e.InvalidRequestError)
    assert error.field == "language" and error.fields[0].message.startswith("must be")
    limited = e.error_from_response(
        429, {"error": {"code": "QUEUE_FULL", "message": "m", "details": {"retryAfterSeconds": 2}}}
    )
    assert isinstance(limited, e.RateLimitError) and limited.retry_after == 2.0


def test_a_body_that_is_not_the_envelope_still_names_the_status() -> None:
    error = e.error_from_response(502, "<html>bad gateway</html>")
    assert (error.code, error.message) == ("HTTP_502", "HTTP 502: <html>bad gateway</html>")
    assert e.error_from_response(404, None).code == "HTTP_404"

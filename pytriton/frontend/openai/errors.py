"""OpenAI's error answer: `{"error": {"message", "type", "param", "code"}}` with the status OpenAI gives the case.

Every refusal of the OpenAI port takes this shape (the `openai` client reads `message` and `code` from it), the
listener's own (413 for a body past the limit, 408, 431) too (`refusal`)."""

from __future__ import annotations

from typing import Any

import orjson

from pytriton.exceptions import ServerError, Status
from pytriton.frontend.http1 import HttpResponse

JSON = ("Content-Type", "application/json")
INVALID = "invalid_request_error"
SERVER = "server_error"

# A core error's status as OpenAI answers it (the model's own refusals are bad requests; a model or server that cannot
# serve now is 503; a failure of the model's execution is 500).
_STATUS = {
    Status.INVALID_ARG: 400,
    Status.NOT_FOUND: 404,
    Status.UNAVAILABLE: 503,
    Status.UNSUPPORTED: 400,
    Status.ALREADY_EXISTS: 400,
    Status.CANCELLED: 400,
    Status.UNKNOWN: 400,
    Status.INTERNAL: 500,
}


class OpenAIError(Exception):
    """A refusal of the OpenAI port: its HTTP status, message, OpenAI type, the request field it is about and code."""

    def __init__(self, status: int, message: str, kind: str = INVALID, param: str | None = None,
                 code: str | None = None):  # fmt: skip
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code

    @classmethod
    def of(cls, exc: ServerError) -> OpenAIError:
        """A core error (unknown model, the model's refusal or failure) as OpenAI's."""
        status = _STATUS.get(exc.status, 400)
        code = "model_not_found" if exc.status is Status.NOT_FOUND else None
        return cls(status, exc.message, SERVER if status >= 500 else INVALID, code=code)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    def response(self) -> HttpResponse:
        return HttpResponse(self.status, [orjson.dumps(self.body())], [JSON])


def invalid(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    return OpenAIError(400, message, INVALID, param, code)


def refusal(status: int, message: str) -> HttpResponse:
    """The listener's refusals (a body past the limit, a late head or body) in OpenAI's shape."""
    return OpenAIError(status, message, SERVER if status >= 500 else INVALID).response()


__all__ = ["INVALID", "SERVER", "OpenAIError", "invalid", "refusal"]

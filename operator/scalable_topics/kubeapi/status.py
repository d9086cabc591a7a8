"""metav1.Status: the body of every error the API server answers, and the exception that carries
one out of a request handler."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Reason(StrEnum):
    """StatusReason values (k8s.io/apimachinery/pkg/apis/meta/v1) this server answers with."""

    BAD_REQUEST = "BadRequest"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    NOT_FOUND = "NotFound"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    NOT_ACCEPTABLE = "NotAcceptable"
    ALREADY_EXISTS = "AlreadyExists"
    CONFLICT = "Conflict"
    GONE = "Gone"
    EXPIRED = "Expired"
    UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
    INVALID = "Invalid"
    TOO_MANY_REQUESTS = "TooManyRequests"
    INTERNAL_ERROR = "InternalError"
    SERVICE_UNAVAILABLE = "ServiceUnavailable"
    TIMEOUT = "Timeout"


class CauseType(StrEnum):
    """CauseType values: what is wrong with one field."""

    NOT_FOUND = "FieldValueNotFound"
    REQUIRED = "FieldValueRequired"
    DUPLICATE = "FieldValueDuplicate"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    TYPE_INVALID = "FieldValueTypeInvalid"
    UNKNOWN_FIELD = "FieldValueUnknown"
    UNEXPECTED_SERVER_RESPONSE = "UnexpectedServerResponse"


@dataclass(frozen=True, slots=True)
class Cause:
    """One problem with one field: ``field`` is its path (``spec.initialSegments``,
    ``spec.subscriptions[0].name``, ``metadata.labels[app]``), ``message`` says what is wrong
    in the API server's words (``Invalid value: 0: ... should be greater than or equal to 1``)."""

    reason: CauseType
    field: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"reason": self.reason.value, "message": self.message, "field": self.field}

    def describe(self) -> str:
        """The cause as it reads in the Status message: ``<field>: <message>``."""
        return f"{self.field}: {self.message}" if self.field else self.message


class ApiError(Exception):
    """A request failed with a metav1.Status; handlers raise it, the server answers it."""

    def __init__(
        self,
        code: int,
        reason: Reason,
        message: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        group: str | None = None,
        causes: Sequence[Cause] = (),
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.kind = kind
        self.name = name
        self.group = group
        self.causes = tuple(causes)
        self.retry_after_seconds = retry_after_seconds

    def status(self) -> dict[str, Any]:
        return status_object(self)


def status_object(error: ApiError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.reason.value,
        "code": error.code,
    }
    details: dict[str, Any] = {}
    if error.name is not None:
        details["name"] = error.name
    if error.group is not None:
        details["group"] = error.group
    if error.kind is not None:
        details["kind"] = error.kind
    if error.causes:
        details["causes"] = [cause.to_json() for cause in error.causes]
    if error.retry_after_seconds is not None:
        details["retryAfterSeconds"] = error.retry_after_seconds
    if details:
        body["details"] = details
    return body


def invalid(kind: str, name: str, group: str, causes: Sequence[Cause]) -> ApiError:
    """422 Invalid, worded as the API server words it:
    ``ScalableTopic.scalabletopics.dev "orders" is invalid: [spec.a: ..., spec.b: ...]``."""
    qualified = f"{kind}.{group}" if group else kind
    described = [cause.describe() for cause in causes]
    listed = described[0] if len(described) == 1 else f"[{', '.join(described)}]"
    return ApiError(
        422,
        Reason.INVALID,
        f'{qualified} "{name}" is invalid: {listed}',
        kind=kind,
        name=name,
        group=group,
        causes=causes,
    )


def success(
    kind: str | None = None,
    name: str | None = None,
    group: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """The Status a delete answers when the object is gone at once."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    }
    details = {
        key: value
        for key, value in (("name", name), ("group", group), ("kind", kind), ("uid", uid))
        if value is not None
    }
    if details:
        body["details"] = details
    return body

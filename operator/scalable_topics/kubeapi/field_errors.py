"""Field errors as k8s.io/apimachinery's ``field`` package builds them: paths
(``spec.subscriptions[0].name``, ``spec.properties[tier]``) and messages
(``Invalid value: 0: ...``, ``Required value``, ``Too many: 3: must have at most 2 items``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from scalable_topics.kubeapi.go_values import go_json, go_quote, go_scalar
from scalable_topics.kubeapi.status import Cause, CauseType

# The path of a field error that names no field (field.Path nil): kube-apiserver prints "<nil>".
NO_FIELD: Final = "<nil>"


class _Omitted:
    """field.OmitValueType: the message carries no value (``Invalid value: <detail>``)."""

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Final = _Omitted()


class GoText(str):
    """A value already written out as Go writes it (a struct printed by json.Marshal): shown as
    it is, not quoted."""


_LABELS: Final = {
    CauseType.NOT_FOUND: "Not found",
    CauseType.REQUIRED: "Required value",
    CauseType.DUPLICATE: "Duplicate value",
    CauseType.INVALID: "Invalid value",
    CauseType.NOT_SUPPORTED: "Unsupported value",
    CauseType.FORBIDDEN: "Forbidden",
    CauseType.TOO_LONG: "Too long",
    CauseType.TOO_MANY: "Too many",
    CauseType.TYPE_INVALID: "Invalid value",
}
_WITHOUT_VALUE: Final = frozenset({CauseType.REQUIRED, CauseType.FORBIDDEN, CauseType.TOO_LONG})


def child(path: str, name: str) -> str:
    """``path.Child(name)``; ``""`` is the nil path."""
    return f"{path}.{name}" if path else name


def index(path: str, position: int) -> str:
    """``path.Index(position)``."""
    return f"{path}[{position}]"


def key(path: str, map_key: str) -> str:
    """``path.Key(map_key)``: a map entry, ``spec.properties[tier]``."""
    return f"{path}[{map_key}]"


def body(reason: CauseType, value: object, detail: str) -> str:
    """``field.Error.ErrorBody``: the message without the field."""
    text = _LABELS[reason]
    if reason not in _WITHOUT_VALUE and value is not OMITTED:
        text = f"{text}: {value if isinstance(value, GoText) else go_scalar(value)}"
    return f"{text}: {detail}" if detail else text


def cause(reason: CauseType, path: str, value: object, detail: str) -> Cause:
    return Cause(reason, path or NO_FIELD, body(reason, value, detail))


def invalid(path: str, value: object, detail: str) -> Cause:
    return cause(CauseType.INVALID, path, value, detail)


def type_invalid(path: str, value: object, detail: str) -> Cause:
    return cause(CauseType.TYPE_INVALID, path, value, detail)


def required(path: str, detail: str = "") -> Cause:
    return cause(CauseType.REQUIRED, path, "", detail)


def forbidden(path: str, detail: str) -> Cause:
    return cause(CauseType.FORBIDDEN, path, "", detail)


def duplicate(path: str, value: object) -> Cause:
    return cause(CauseType.DUPLICATE, path, value, "")


def not_supported(path: str, value: object, supported: Sequence[str]) -> Cause:
    detail = "supported values: " + ", ".join(go_quote(v) for v in supported) if supported else ""
    return cause(CauseType.NOT_SUPPORTED, path, value, detail)


def too_long(path: str, max_length: int) -> Cause:
    """The value is left out: ``Too long: may not be more than 128 bytes``."""
    unit = "byte" if max_length == 1 else "bytes"
    detail = f"may not be more than {max_length} {unit}" if max_length >= 0 else "value is too long"
    return cause(CauseType.TOO_LONG, path, "", detail)


def too_many(path: str, actual: int, maximum: int) -> Cause:
    unit = "item" if maximum == 1 else "items"
    detail = f"must have at most {maximum} {unit}" if maximum >= 0 else "has too many items"
    return cause(CauseType.TOO_MANY, path, actual if actual >= 0 else OMITTED, detail)


def enum_value(value: object) -> str:
    """An enum value as a NotSupported error lists it: strings as they are, others as JSON."""
    return value if isinstance(value, str) else go_json(value)

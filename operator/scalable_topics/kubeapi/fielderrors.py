"""Field causes worded as the API server words them (k8s.io/apimachinery field errors), and the
name rules (DNS labels, subdomains, qualified names) whose messages clients see.

``Invalid value: "Foo": <detail>``, ``Required value``, ``Unsupported value: "x": supported
values: "a", "b"``: the value is rendered as Go renders it (strings quoted, numbers bare,
anything else as compact JSON).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from .status import Cause, CauseType


def go_value(value: Any) -> str:
    """A value as a field error shows it: ``%q`` for strings, ``%v`` for numbers and booleans,
    JSON for the rest (Go's json: compact, sorted keys, ``<>&`` escaped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    return go_json(value)


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote`` for the characters API values hold."""
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_GO_ESCAPES["\v"] = "\\v"


def go_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def go_float(value: float) -> str:
    """``fmt.Sprint(float64)``: the shortest digits, in exponent form below 1e-4 or from 1e6
    (``%v`` is ``%g`` with the shortest precision, which decides at exponent 6)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits)
    point = len(text) + exponent  # the decimal point sits after this many digits
    exp = point - 1
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        formatted = f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    elif point <= 0:
        formatted = "0." + "0" * -point + text
    elif point >= len(text):
        formatted = text + "0" * (point - len(text))
    else:
        formatted = text[:point] + "." + text[point:]
    return ("-" if sign else "") + formatted


# -- causes ---------------------------------------------------------------------------------


def _body(label: str, detail: str) -> str:
    return f"{label}: {detail}" if detail else label


def required(field: str, detail: str = "") -> Cause:
    return Cause(CauseType.REQUIRED, field, _body("Required value", detail))


def forbidden(field: str, detail: str = "") -> Cause:
    return Cause(CauseType.FORBIDDEN, field, _body("Forbidden", detail))


def invalid(field: str, value: Any, detail: str = "") -> Cause:
    return Cause(CauseType.INVALID, field, _body(f"Invalid value: {go_value(value)}", detail))


def type_invalid(field: str, value: Any, detail: str = "") -> Cause:
    return Cause(CauseType.TYPE_INVALID, field, _body(f"Invalid value: {go_value(value)}", detail))


def not_supported(field: str, value: Any, supported: Sequence[str]) -> Cause:
    detail = "supported values: " + ", ".join(go_quote(v) for v in supported) if supported else ""
    return Cause(
        CauseType.NOT_SUPPORTED, field, _body(f"Unsupported value: {go_value(value)}", detail)
    )


def duplicate(field: str, value: Any) -> Cause:
    return Cause(CauseType.DUPLICATE, field, f"Duplicate value: {go_value(value)}")


def too_many(field: str, actual: int, maximum: int) -> Cause:
    noun = "item" if maximum == 1 else "items"
    return Cause(
        CauseType.TOO_MANY, field, f"Too many: {actual}: must have at most {maximum} {noun}"
    )


# -- name rules (k8s.io/apimachinery/pkg/util/validation) -----------------------------------

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    shown = "".join(f"{' or ' if i else ''}'{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _max_len(length: int, unit: str = "characters") -> str:
    return f"must be no more than {length} {unit}"


def dns1035_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(_max_len(63))
    if not re.fullmatch(_DNS1035_LABEL, value):
        errors.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL,
                "my-name",
                "abc-123",
            )
        )
    return errors


def dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append(_max_len(63))
    if not re.fullmatch(_DNS1123_LABEL, value):
        if re.fullmatch(_DNS1123_SUBDOMAIN, value):
            errors.append("must not contain dots")
        else:
            errors.append(
                _regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                    "characters or '-', and must start and end with an alphanumeric character",
                    _DNS1123_LABEL,
                    "my-name",
                    "123-abc",
                )
            )
    return errors


def dns1123_subdomain_errors(value: str, *, unit: str = "characters") -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append(_max_len(253, unit))
    if not re.fullmatch(_DNS1123_SUBDOMAIN, value):
        errors.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN,
                "example.com",
            )
        )
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """A label key: an optional DNS subdomain prefix and ``/``, then a name of up to 63."""
    errors: list[str] = []
    name_message = (
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character"
    )
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(name_message, _QUALIFIED_NAME, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(
                "prefix part " + e for e in dns1123_subdomain_errors(prefix, unit="bytes")
            )
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 bytes")
    if not re.fullmatch(_QUALIFIED_NAME, name):
        errors.append(
            "name part "
            + _regex_error(name_message, _QUALIFIED_NAME, "MyName", "my.name", "123-abc")
        )
    return errors

"""JSON values written out as kube-apiserver's Go code writes them into error messages: ``%q``
strings, ``%v`` floats (``1e+06``), ``encoding/json`` documents (sorted keys, ``\\u003c``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal

_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(text: str) -> str:
    """``strconv.Quote``: double quotes, Go escapes, printable runes kept as they are."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate decodes to U+FFFD in Go
            out.append("\ufffd")
        elif char.isprintable():
            out.append(char)
        elif char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits that read back as ``value`` (> 0) and where the decimal
    point goes: ``value == 0.<digits> * 10**point``."""
    _, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    return digits.rstrip("0") or "0", len(digits) + exponent


def _exponent_form(negative: bool, digits: str, point: int, minimal_exponent_digits: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exponent = point - 1
    sign = "-" if exponent < 0 else "+"
    magnitude = str(abs(exponent)).rjust(minimal_exponent_digits, "0")
    return f"{'-' if negative else ''}{mantissa}e{sign}{magnitude}"


def _fixed_form(negative: bool, digits: str, point: int) -> str:
    if point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if negative else "") + text


def go_float(value: float) -> str:
    """``fmt.Sprintf("%v", value)`` for a float64: ``0.9``, ``5000``, ``1e+06``, ``1e-05``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    negative = math.copysign(1.0, value) < 0
    if value == 0:
        return "-0" if negative else "0"
    digits, point = _shortest_digits(abs(value))
    exponent = point - 1
    # strconv's 'g' format with the shortest precision switches to %e from exponent 6 on.
    if exponent < -4 or exponent >= 6:
        return _exponent_form(negative, digits, point, 2)
    return _fixed_form(negative, digits, point)


def go_fixed(value: float) -> str:
    """``strconv.FormatFloat(value, 'f', -1, 64)``: no exponent, shortest digits."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, point = _shortest_digits(abs(value))
    return _fixed_form(value < 0, digits, point)


def _json_float(value: float) -> str:
    """A float64 as ``encoding/json`` writes it (``1e+21``, ``1e-7``, ``0.5``, ``3``)."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    magnitude = abs(value)
    digits, point = _shortest_digits(magnitude)
    if magnitude < 1e-6 or magnitude >= 1e21:
        text = _exponent_form(value < 0, digits, point, 2)
        if text[-4:-1] == "e-0":  # e-07 -> e-7
            text = text[:-2] + text[-1]
        return text
    return _fixed_form(value < 0, digits, point)


def _json_string(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char in "\b\f\n\r\t":
            out.append(_ESCAPES[char])
        elif code < 0x20 or char in "<>&\u2028\u2029":
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def go_json(value: object) -> str:
    """``json.Marshal(value)`` of a decoded JSON value: compact, map keys sorted, HTML-safe."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, Mapping):
        items = sorted((str(k), v) for k, v in value.items())
        return "{" + ",".join(f"{_json_string(k)}:{go_json(v)}" for k, v in items) + "}"
    if isinstance(value, Sequence):
        return "[" + ",".join(go_json(item) for item in value) + "]"
    return _json_string(str(value))


def go_scalar(value: object) -> str:
    """A value as ``%v`` prints it in a field error: numbers and booleans bare, strings quoted,
    anything else as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)

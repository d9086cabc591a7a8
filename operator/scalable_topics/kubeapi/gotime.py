"""Timestamps as the API server decodes them, with Go's ``time.Parse`` error wording.

``metav1.Time`` is parsed with RFC 3339 (fractional seconds optional), ``metav1.MicroTime`` with
``2006-01-02T15:04:05.000000Z07:00``: exactly six fractional digits. A value that does not
parse makes the request body undecodable, and the API server answers 400 with Go's message,
e.g. ``parsing time "2024-05-01T10:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse
"Z" as ".000000"``.
"""

from __future__ import annotations

import calendar
import re

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"

# The layouts split into (literal prefix, element) chunks, as Go's nextStdChunk sees them.
_CHUNKS = {
    RFC3339: (
        ("", "2006"),
        ("-", "01"),
        ("-", "02"),
        ("T", "15"),
        (":", "04"),
        (":", "05"),
        ("", "Z07:00"),
    ),
    RFC3339_MICRO: (
        ("", "2006"),
        ("-", "01"),
        ("-", "02"),
        ("T", "15"),
        (":", "04"),
        (":", "05"),
        ("", ".000000"),
        ("", "Z07:00"),
    ),
}


class _Bad(Exception):
    pass


class _OutOfRange(Exception):
    pass


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _error(layout: str, value: str, layout_elem: str, value_elem: str, message: str = "") -> str:
    if message:
        return f"parsing time {_quote(value)}{message}"
    return (
        f"parsing time {_quote(value)} as {_quote(layout)}: cannot parse "
        f"{_quote(value_elem)} as {_quote(layout_elem)}"
    )


def _getnum(text: str, fixed: bool) -> tuple[int, str]:
    if not text[:1].isdigit() or not text[:1].isascii():
        raise _Bad
    if not text[1:2].isdigit() or not text[1:2].isascii():
        if fixed:
            raise _Bad
        return int(text[0]), text[1:]
    return int(text[:2]), text[2:]


def _atoi(text: str) -> int:
    body = text[1:] if text[:1] in ("-", "+") else text
    if not body or not body.isascii() or not body.isdigit():
        raise _Bad
    return -int(body) if text[:1] == "-" else int(body)


def parse_error(value: str, layout: str) -> str | None:
    """None when ``value`` parses with ``layout`` (one of RFC3339, RFC3339_MICRO), else the
    error ``time.Parse`` returns, word for word."""
    rest = value
    year = month = day = 0
    for prefix, element in _CHUNKS[layout]:
        for char in prefix:
            if not rest or rest[0] != char:
                return _error(layout, value, prefix, rest)
            rest = rest[1:]
        hold = rest
        out_of_range = ""
        try:
            if element == "2006":
                if len(rest) < 4 or not rest[0].isdigit():
                    raise _Bad
                year, rest = _atoi(rest[:4]), rest[4:]
            elif element == "01":
                month, rest = _getnum(rest, True)
                if month <= 0 or month > 12:
                    out_of_range = "month"
            elif element == "02":
                day, rest = _getnum(rest, True)
            elif element == "15":
                hour, rest = _getnum(rest, False)
                if hour >= 24:
                    out_of_range = "hour"
            elif element == "04":
                minute, rest = _getnum(rest, True)
                if minute >= 60:
                    out_of_range = "minute"
            elif element == "05":
                second, rest = _getnum(rest, True)
                if second >= 60:
                    out_of_range = "second"
                elif layout == RFC3339 and rest[:1] in (".", ",") and rest[1:2].isdigit():
                    # A fraction the layout does not name is accepted.
                    digits = 2
                    while digits < len(rest) and rest[digits].isdigit():
                        digits += 1
                    rest = rest[digits:]
            elif element == ".000000":
                if len(rest) < 7:
                    raise _Bad
                if rest[0] not in ".,":
                    raise _Bad
                if _atoi(rest[1:7]) < 0:
                    out_of_range = "fractional second"
                rest = rest[7:]
            else:  # Z07:00
                if rest[:1] == "Z":
                    rest = rest[1:]
                else:
                    if len(rest) < 6 or rest[3] != ":":
                        raise _Bad
                    sign, hours, minutes, rest = rest[0], rest[1:3], rest[4:6], rest[6:]
                    zone_hour, _ = _getnum(hours, True)
                    zone_minute, _ = _getnum(minutes, True)
                    if zone_hour > 24:
                        out_of_range = "time zone offset hour"
                    if zone_minute > 60:
                        out_of_range = "time zone offset minute"
                    if sign not in "+-":
                        raise _Bad
        except _Bad:
            return _error(layout, value, element, hold)
        if out_of_range:
            return _error(layout, value, element, rest, f": {out_of_range} out of range")
    if rest:
        return _error(layout, value, "", rest, f": extra text: {_quote(rest)}")
    if day < 1 or day > calendar.monthrange(year if year > 0 else 2000, month)[1]:
        return _error(layout, value, "", rest, ": day out of range")
    return None


def micro_time_error(value: str) -> str | None:
    return parse_error(value, RFC3339_MICRO)


def time_error(value: str) -> str | None:
    return parse_error(value, RFC3339)


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def is_rfc3339(value: str) -> bool:
    return bool(_RFC3339.fullmatch(value)) and time_error(value) is None

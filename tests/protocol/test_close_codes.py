"""The close code each error ends a connection with (docs/protocol.md, section 4)."""

from __future__ import annotations

import pytest

from scalable_topics.protocol import CONNECTION_FATAL, CloseCode, ErrorCode, close_code_for

# Written out, not derived: the table in docs/protocol.md says the same.
EXPECTED = {
    ErrorCode.MALFORMED_FRAME: 1002,
    ErrorCode.FRAME_TOO_LARGE: 1009,
    ErrorCode.UNKNOWN_COMMAND: 1002,
    ErrorCode.UNSUPPORTED_VERSION: 1002,
    ErrorCode.NOT_CONNECTED: 1002,
    ErrorCode.UNEXPECTED_COMMAND: 1002,
    ErrorCode.AUTHENTICATION_FAILED: 1008,
}


@pytest.mark.parametrize("code", list(ErrorCode), ids=str)
def test_every_fatal_code_has_its_close_code_and_no_other_closes(code: ErrorCode) -> None:
    assert close_code_for(code) == EXPECTED.get(code)


def test_the_table_covers_exactly_the_fatal_codes() -> None:
    assert set(EXPECTED) == CONNECTION_FATAL


def test_close_codes_are_rfc_6455_numbers() -> None:
    assert {code.name: int(code) for code in CloseCode} == {
        "NORMAL": 1000,
        "GOING_AWAY": 1001,
        "PROTOCOL_ERROR": 1002,
        "UNSUPPORTED_DATA": 1003,
        "POLICY_VIOLATION": 1008,
        "MESSAGE_TOO_BIG": 1009,
    }

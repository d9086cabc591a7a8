"""The broker's refusals: each carries the wire error code its client receives."""

from __future__ import annotations

from ..protocol import ErrorCode


class BrokerError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code

"""kopf under ``stctl operator`` retries an unreachable API server for ever, one WARNING line
per attempt, instead of escalating after its default eight backoffs and stopping."""

from __future__ import annotations

import collections.abc
import itertools
import logging

from scalable_topics.kopf_app import RetriesAsWarnings, RetryForever


def test_the_backoffs_never_run_out_and_are_capped() -> None:
    backoffs = RetryForever()
    # kopf counts the attempts of a Sized sequence and escalates after the last one.
    assert not isinstance(backoffs, collections.abc.Sized)
    assert list(itertools.islice(backoffs, 8)) == [1, 2, 4, 8, 16, 30, 30, 30]
    assert next(iter(backoffs)) == 1  # every request starts afresh


def record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_a_retried_request_is_a_warning_and_nothing_else_changes() -> None:
    retried = record(
        "kopf._core.reactor.observation",
        logging.ERROR,
        "Request attempt #3 failed; will retry: GET https://api/apis -> ClientConnectorError()",
    )
    escalated = record(
        "kopf._core.reactor.observation", logging.ERROR, "Request attempt #9/9 failed; escalating"
    )
    ours = record("scalable_topics.x", logging.ERROR, "Request attempt #1 failed; will retry")
    keep = RetriesAsWarnings()
    assert all(keep.filter(r) for r in (retried, escalated, ours))
    assert (retried.levelno, retried.levelname) == (logging.WARNING, "WARNING")
    assert (escalated.levelno, ours.levelno) == (logging.ERROR, logging.ERROR)

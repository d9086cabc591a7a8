"""The audit log file: one JSON object per line, appended; what a reader of it sees."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest

from scalable_topics.kubeapi.audit import AuditEvent, AuditLog, read_audit_log
from scalable_topics.kubeapi.request_attributes import RequestAttributes
from scalable_topics.kubeapi.users import ADMIN, NOBODY, User

TOPIC_STATUS = RequestAttributes(
    "patch", "scalabletopics.dev", "scalabletopics", "status", "team", "orders"
)


def test_a_line_per_event_with_every_field(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog.open(path)
    log.record(AuditEvent(ADMIN, TOPIC_STATUS, 200))
    log.record(AuditEvent(NOBODY, RequestAttributes("get", non_resource_url="/apis"), 401))
    log.close()

    lines = path.read_text().split("\n")
    assert lines[2:] == [""]
    assert json.loads(lines[0]) == {
        "user": "admin",
        "groups": ["system:masters", "system:authenticated"],
        "verb": "patch",
        "apiGroup": "scalabletopics.dev",
        "resource": "scalabletopics",
        "subresource": "status",
        "namespace": "team",
        "name": "orders",
        "nonResourceURL": "",
        "code": 200,
        "dryRun": False,
    }
    assert list(json.loads(lines[0])) == list(read_audit_log(path)[0])  # in this order
    assert read_audit_log(path)[1]["nonResourceURL"] == "/apis"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_it_appends_to_what_is_there_and_stops_when_closed(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    for code in (200, 201):
        log = AuditLog.open(path)
        log.record(AuditEvent(ADMIN, TOPIC_STATUS, code))
        log.close()
    log.record(AuditEvent(ADMIN, TOPIC_STATUS, 500))  # after close: not written
    assert [event["code"] for event in read_audit_log(path)] == [200, 201]


def test_a_reader_sees_whole_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    assert read_audit_log(path) == []
    # A name JSON leaves unescaped with a line separator in it is still one line.
    user = User("line\u2028separator")
    path.write_bytes(AuditEvent(user, TOPIC_STATUS, 200).line() + b'{"user": "half')
    assert [event["user"] for event in read_audit_log(path)] == [user.name]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_failed_write_is_a_warning_not_a_failed_request(caplog: pytest.LogCaptureFixture) -> None:
    log = AuditLog.open(Path("/dev/full"))
    with caplog.at_level(logging.WARNING):
        log.record(AuditEvent(ADMIN, TOPIC_STATUS, 200))
    log.close()
    assert "cannot append to the audit log /dev/full" in caplog.text

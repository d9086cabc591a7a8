"""The audit log: one JSON object per line for every request the API server answers, saying who
asked what (the attributes RBAC decides on) and the status code of the answer. Its purpose is to
check RBAC manifests against the calls a program really makes: run it against this server, then
compare the (user, verb, group, resource, subresource, namespace, name) lines with the rules.

A line is written when the answer's status line is sent, so a watch is logged when it starts.
Each line is one ``write`` to a file opened with ``O_APPEND``: a reader sees whole lines, in
the order requests were answered. A line is a few hundred bytes and the file is local, so the
write is made on the event loop.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .request_attributes import RequestAttributes
from .users import User

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    user: User
    attributes: RequestAttributes
    code: int

    def as_json(self) -> dict[str, Any]:
        attributes = self.attributes
        return {
            "user": self.user.name,
            "groups": list(self.user.groups),
            "verb": attributes.verb,
            "apiGroup": attributes.api_group,
            "resource": attributes.resource,
            "subresource": attributes.subresource,
            "namespace": attributes.namespace,
            "name": attributes.name,
            "nonResourceURL": attributes.non_resource_url,
            "code": self.code,
            "dryRun": attributes.dry_run,
        }

    def line(self) -> bytes:
        return (
            json.dumps(self.as_json(), separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        )


class AuditSink(Protocol):
    def record(self, event: AuditEvent) -> None: ...


class AuditLog:
    """An audit log file, appended to from when it is opened until it is closed."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def open(cls, path: Path) -> AuditLog:
        """Open ``path`` for appending, creating it (mode 0600) when missing."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        return cls(path, os.open(path, flags, 0o600))

    def record(self, event: AuditEvent) -> None:
        if self._fd is None:
            return  # closed at shutdown: a request answered after it is not logged
        data = event.line()
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError as exc:  # a full disk must not fail the request it would log
            log.warning("cannot append to the audit log %s: %s", self.path, exc)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_audit_log(path: Path) -> list[dict[str, Any]]:
    """The events logged in ``path`` so far, oldest first (a line still being written, without
    its newline yet, is left for the next read)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    whole = data[: data.rfind(b"\n") + 1]
    return [json.loads(line) for line in whole.split(b"\n") if line]

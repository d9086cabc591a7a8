"""How many connections a broker serves, and how much one connection may hold open.

- **Connections.** A broker serves at most ``--max-connections`` WebSockets (or half its
  open-files limit when that is lower: each holds a socket, see open_files.py), and at most
  ``--max-connections-per-ip`` from one peer address (0, the default: no limit per address,
  since clients behind NAT or a proxy share one). The WebSocket handler takes a slot before the
  upgrade and gives it back when the connection ends; an upgrade past a limit is answered 503
  ``ServiceNotReady`` with ``Retry-After`` and never upgraded, so a full broker spends nothing
  more on it (``refused_upgrade``). The admin HTTP API takes no slot: its requests are bounded
  by the handshake and body timeouts.
- **Open handles.** One connection holds at most ``--max-open-per-connection`` producers (ones
  waiting for exclusive access included), consumers, DAG and namespace watches, relayed consumer
  registrations and relayed exclusive grants, all kinds together. A request that would open one more is
  refused with ``TooManyOpen`` (``check_room``); the connection and what it holds stay. The
  session counts what it holds from its own tables at each request, so closing anything frees
  its place and no count can drift.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from aiohttp import web

from ..protocol import ErrorCode
from ..protocol.upgrade import REFUSAL_HEADER
from .config import BrokerConfig
from .errors import BrokerError
from .open_files import FileBudget, file_budget

# Seconds a refused client is asked to wait: connections free up as clients leave, not at once.
RETRY_AFTER_SECONDS: Final = 5
MAX_CONNECTIONS_FLAG: Final = "--max-connections"
MAX_CONNECTIONS_PER_IP_FLAG: Final = "--max-connections-per-ip"


class ConnectionLimits:
    """The broker-wide side: the connection slots, and the refusals for /metrics."""

    def __init__(
        self,
        identity: str,
        *,
        max_connections: int,
        max_connections_per_ip: int,
        max_open_per_connection: int,
        lowered_from: int | None = None,
        files: int | None = None,
    ) -> None:
        """``lowered_from``: the --max-connections asked for, when ``files`` (the open-files
        limit) lowered it to ``max_connections``."""
        self._identity = identity
        self.max_connections = max_connections
        self._named = f"{MAX_CONNECTIONS_FLAG} ({max_connections})"
        if lowered_from is not None:
            self._named = (
                f"{MAX_CONNECTIONS_FLAG} ({lowered_from}, lowered to {max_connections} by the "
                f"open-files limit of {files})"
            )
        self.max_connections_per_ip = max_connections_per_ip  # 0: no limit
        self.max_open_per_connection = max_open_per_connection
        self.connections = 0
        self._by_address: Counter[str] = Counter()
        self.refused = {MAX_CONNECTIONS_FLAG: 0, MAX_CONNECTIONS_PER_IP_FLAG: 0}
        self.opens_refused_total = 0

    @classmethod
    def of(cls, config: BrokerConfig, budget: FileBudget | None = None) -> ConnectionLimits:
        """The limits of ``config`` within ``budget`` (default: the process's open files)."""
        budget = budget or file_budget(config.max_connections)
        lowered = budget.connections < config.max_connections
        return cls(
            config.identity,
            max_connections=budget.connections,
            max_connections_per_ip=config.max_connections_per_ip,
            max_open_per_connection=config.max_open_per_connection,
            lowered_from=config.max_connections if lowered else None,
            files=budget.limit,
        )

    def admit(self, address: str | None) -> str | None:
        """Take a slot for a connection from ``address`` (None when unknown: only the broker's
        limit applies); the refusal's message when a limit is reached, and no slot taken."""
        if self.connections >= self.max_connections:
            self.refused[MAX_CONNECTIONS_FLAG] += 1
            return (
                f"broker {self._identity} holds {self.connections} connections, its "
                f"{self._named}; connect to another broker, or again later"
            )
        per_ip = self.max_connections_per_ip
        if address is not None and per_ip and self._by_address[address] >= per_ip:
            self.refused[MAX_CONNECTIONS_PER_IP_FLAG] += 1
            return (
                f"broker {self._identity} holds {self._by_address[address]} connections from "
                f"{address}, its {MAX_CONNECTIONS_PER_IP_FLAG} ({per_ip}); close some, or "
                "connect again later"
            )
        self.connections += 1
        if address is not None:
            self._by_address[address] += 1
        return None

    def leave(self, address: str | None) -> None:
        """Give back the slot ``admit`` took for a connection from ``address``."""
        self.connections -= 1
        if address is not None:
            self._by_address[address] -= 1
            if not self._by_address[address]:
                del self._by_address[address]  # the table holds only addresses connected now

    def check_room(self, held: int, request: str) -> None:
        """Refuse ``request`` (a command opening something) on a connection that holds
        ``held`` open already, when that is the limit."""
        limit = self.max_open_per_connection
        if held < limit:
            return
        self.opens_refused_total += 1
        raise BrokerError(
            ErrorCode.TOO_MANY_OPEN,
            f"{request} refused: this connection holds {held} producers, consumers, watches, "
            f"consumer registrations and exclusive grants open, the broker's "
            f"--max-open-per-connection ({limit}); close some first",
        )


def refused_upgrade(message: str) -> web.Response:
    """The answer to an upgrade past a connection limit: 503 with the admin APIs' JSON error,
    ``Retry-After``, and the message in REFUSAL_HEADER for WebSocket clients, which see only
    the headers. The TCP connection is closed after it rather than kept alive, so a client
    that keeps asking holds no socket between attempts."""
    response = web.json_response(
        {"code": ErrorCode.SERVICE_NOT_READY.value, "message": message},
        status=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS), REFUSAL_HEADER: message},
    )
    response.force_close()
    return response

"""A request aiohttp cannot parse is the client's fault: one DEBUG line, no traceback.

aiohttp answers a request it cannot parse (a malformed request line, a header or line too
long, an invalid URL) with 400 and closes the connection, but logs it through its
``aiohttp.server`` logger at ERROR with a traceback, as it logs a handler that crashed. Any
client can send such bytes, so anyone could fill the servers' logs with tracebacks. The filter
installed here replaces each such record (its exception a parse error of a 4xx status) by one
DEBUG line naming the peer and the problem, on this module's logger; every other record of
``aiohttp.server``, a handler's unexpected exception above all, passes unchanged.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

SERVER_LOGGER = "aiohttp.server"
log = logging.getLogger(__name__)
_MESSAGE_CHARS = 200


class _MalformedRequests(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, HttpProcessingError) or not 400 <= error.code < 500:
            return True
        peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        log.debug("refused a malformed request from %s: %s", peer, _problem(error))
        return False


def _problem(error: HttpProcessingError) -> str:
    """One line, short: aiohttp's message can quote the offending line over several."""
    return f"{type(error).__name__}: {' '.join(str(error.message).split())[:_MESSAGE_CHARS]}"


_FILTER = _MalformedRequests()


def quiet_malformed_requests() -> None:
    """Install the filter on aiohttp's server logger (once, whoever calls it)."""
    logger = logging.getLogger(SERVER_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)

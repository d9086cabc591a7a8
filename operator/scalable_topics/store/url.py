"""Pick and open a store adapter from a URL, as components take it from their configuration,
behind the request budget that adapter's clients keep by default (or the one they are given)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from urllib.parse import unquote, urlsplit

from ..model.clock import Clock
from .budget import UNLIMITED, BudgetedStore, BudgetSettings
from .embedded import EmbeddedStore
from .kinds import DEFAULT_KINDS, KindInfo

SUPPORTED = (
    "embedded:///absolute/path/to/store.db",
    "embedded:relative/path/to/store.db",
)

# The request budget of each adapter's clients unless told otherwise (stctl --store-qps and
# --store-burst). The embedded store is a local file that no server protects, so nothing
# limits it; an adapter for an API server that throttles its clients adds its own limits here.
DEFAULT_BUDGETS: Mapping[str, BudgetSettings] = MappingProxyType({"embedded": UNLIMITED})


def default_budget(url: str) -> BudgetSettings:
    """The request budget the adapter for ``url`` keeps by default; ValueError for a URL no
    adapter serves."""
    budget = DEFAULT_BUDGETS.get(urlsplit(url).scheme)
    if budget is None:
        raise _unsupported(url)
    return budget


def open_store(
    url: str,
    *,
    clock: Clock | None = None,
    budget: BudgetSettings | None = None,
    kinds: Mapping[str, KindInfo] = DEFAULT_KINDS,
) -> BudgetedStore:
    """Open the store ``url`` names, every request paced by ``budget`` (by default the
    adapter's, see DEFAULT_BUDGETS), serving ``kinds`` (the API server's are live: CRDs add
    to them); raise ValueError for a URL no adapter serves."""
    parts = urlsplit(url)
    if parts.scheme != "embedded":
        raise _unsupported(url)
    if parts.netloc or parts.query or parts.fragment or not parts.path:
        raise ValueError(
            f"store URL {url!r} must name a file and nothing else: {' or '.join(SUPPORTED)}"
        )
    inner = EmbeddedStore(unquote(parts.path), clock=clock, kinds=kinds)
    return BudgetedStore(inner, budget if budget is not None else default_budget(url))


def _unsupported(url: str) -> ValueError:
    return ValueError(f"unsupported store URL {url!r}: use one of {', '.join(SUPPORTED)}")

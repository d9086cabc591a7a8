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
from .port import Store

SUPPORTED = (
    "embedded:///absolute/path/to/store.db",
    "embedded:relative/path/to/store.db",
    "kubernetes: (KUBECONFIG or ~/.kube/config, its current context)",
    "kubernetes:in-cluster (the pod's service account)",
    "kubernetes:///absolute/path/to/kubeconfig",
    "kubernetes:relative/path/to/kubeconfig (each kubeconfig form takes ?context=NAME)",
)

# The request budget of each adapter's clients unless told otherwise (stctl --store-qps and
# --store-burst). The embedded store is a local file that no server protects, so nothing
# limits it. A Kubernetes API server queues a client that asks too much (priority and
# fairness) and then answers 429, so that adapter paces itself: 50 requests a second, bursts
# of 100. client-go's own default (5/s, burst 10) is sized for the many small controllers of
# a cluster and would take minutes to start a few thousand topics (a list, a status write and
# a Lease per topic); controller-runtime raises it to 20/s, burst 30. One operator process
# that owns every topic of the cluster is a heavier client than either, and still far below
# what a control plane serves (default inflight limits of 400 reads and 200 writes).
DEFAULT_BUDGETS: Mapping[str, BudgetSettings] = MappingProxyType(
    {"embedded": UNLIMITED, "kubernetes": BudgetSettings(qps=50.0, burst=100)}
)


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
    inner: Store
    if parts.scheme == "embedded":
        if parts.netloc or parts.query or parts.fragment or not parts.path:
            raise ValueError(
                f"store URL {url!r} must name a file and nothing else: {' or '.join(SUPPORTED[:2])}"
            )
        inner = EmbeddedStore(unquote(parts.path), clock=clock, kinds=kinds)
    elif parts.scheme == "kubernetes":
        # Imported here: kubernetes_asyncio (and what it imports) loads only for this adapter.
        # The API server stamps every time it writes, so there is no clock to give it.
        from .kubernetes import KubernetesStore, parse_url

        inner = KubernetesStore(parse_url(url), kinds=kinds)
    else:
        raise _unsupported(url)
    return BudgetedStore(inner, budget if budget is not None else default_budget(url))


def _unsupported(url: str) -> ValueError:
    return ValueError(f"unsupported store URL {url!r}: use one of {', '.join(SUPPORTED)}")

"""The kinds of object the store serves, with what the Kubernetes API knows of each."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..model.resources import API_VERSION, ScalableTopic, Segment


@dataclass(frozen=True, slots=True)
class KindInfo:
    kind: str
    api_version: str
    plural: str
    # With a status subresource, replace() ignores status and replace_status() touches nothing
    # else, and only spec changes bump the generation; without one, status is an ordinary field.
    status_subresource: bool
    # Cluster-scoped objects (Namespaces, CustomResourceDefinitions) have no metadata.namespace;
    # the port addresses them with the namespace "".
    namespaced: bool = True


LEASE = KindInfo("Lease", "coordination.k8s.io/v1", "leases", status_subresource=False)
EVENT = KindInfo("Event", "v1", "events", status_subresource=False)
CONFIG_MAP = KindInfo("ConfigMap", "v1", "configmaps", status_subresource=False)

DEFAULT_KINDS: Mapping[str, KindInfo] = MappingProxyType(
    {
        info.kind: info
        for info in (
            KindInfo(
                ScalableTopic.KIND, API_VERSION, ScalableTopic.PLURAL, status_subresource=True
            ),
            KindInfo(Segment.KIND, API_VERSION, Segment.PLURAL, status_subresource=True),
            LEASE,
            EVENT,
            CONFIG_MAP,
        )
    }
)

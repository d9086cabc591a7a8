"""The cluster's autoscale settings, as the process's ConfigMap informer sees them.

Read on every use, so a change of the ConfigMap takes effect at the next load report or
evaluation without a restart. A ConfigMap that is missing means the built-in defaults; one
that is invalid is refused as a whole, naming every problem, and the last valid settings stay
in force (a typo must not switch autoscale off, or to a policy nobody meant).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..model.autoscale_config import (
    CLUSTER_CONFIGMAP,
    CLUSTER_CONFIGMAP_KEY,
    CLUSTER_DEFAULTS,
    AutoScaleConfig,
    parse_cluster_config,
)
from .informer import Change, Informer, Unsubscribe, resource_version_of

log = logging.getLogger(__name__)


class ClusterAutoScale:
    def __init__(self, configmaps: Informer, namespace: str) -> None:
        self._configmaps = configmaps
        self._namespace = namespace
        self._in_force = CLUSTER_DEFAULTS
        self._read_version: str | None = None
        self._problem: str | None = None

    @property
    def location(self) -> str:
        return f"ConfigMap {self._namespace}/{CLUSTER_CONFIGMAP} key {CLUSTER_CONFIGMAP_KEY}"

    def current(self) -> AutoScaleConfig:
        """The settings in force now."""
        self._refresh()
        return self._in_force

    @property
    def problem(self) -> str | None:
        """Why the ConfigMap as it is now is not in force, or None when it is (or is absent)."""
        self._refresh()
        return self._problem

    def subscribe(self, handler: Callable[[], None]) -> Unsubscribe:
        """Call ``handler`` whenever the ConfigMap is created, changed or deleted."""

        def changed(_: Change) -> None:
            handler()

        return self._configmaps.subscribe_key((self._namespace, CLUSTER_CONFIGMAP), changed)

    def _refresh(self) -> None:
        obj = self._configmaps.get(self._namespace, CLUSTER_CONFIGMAP)
        version = None if obj is None else resource_version_of(obj)
        if version == self._read_version:
            return
        self._read_version = version
        if obj is None:
            self._in_force, self._problem = CLUSTER_DEFAULTS, None
            return
        text = (obj.get("data") or {}).get(CLUSTER_CONFIGMAP_KEY)
        try:
            if not isinstance(text, str):
                raise ValueError(f"it has no key {CLUSTER_CONFIGMAP_KEY}")
            self._in_force, self._problem = parse_cluster_config(text), None
        except ValueError as error:
            self._problem = str(error)
            log.error(
                "%s is not used: %s; the settings in force stay as they were",
                self.location,
                error,
            )
            return
        log.info("autoscale settings from %s are in force", self.location)

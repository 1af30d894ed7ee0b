"""Named faults per node, which handlers honour to play documented failures.

A node's faults are the union of:

- its annotation `sim.gpuops.io/faults`: comma-separated fault names, e.g.
  `kubectl annotate node kwok-gpu-0 sim.gpuops.io/faults=device-plugin-unhealthy,driver-crashloop`;
- ConfigMap `gpuops-sim-faults` in namespace `gpuops-sim`: `data` maps a node name to comma-separated
  fault names; the key `_all` applies to every node. (`*` is accepted too where a ConfigMap is built
  without the API server, but the API server rejects `*` as a ConfigMap key: keys may only hold
  letters, digits, `-`, `_` and `.`.)

Names are trimmed and lower-cased; empty entries are ignored. A fault name no handler declares (in
`Handler.known_faults`) is logged as a warning once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

LOG = logging.getLogger("gpuops_lab.simulator")

FAULTS_ANNOTATION = "sim.gpuops.io/faults"
FAULTS_CONFIGMAP = "gpuops-sim-faults"
FAULTS_NAMESPACE = "gpuops-sim"
ALL_NODES = "*"
ALL_NODES_ALIAS = "_all"
ALL_NODES_KEYS = frozenset({ALL_NODES, ALL_NODES_ALIAS})


def parse_faults(value: str | None) -> frozenset[str]:
    """`"a, b,,C"` -> {"a", "b", "c"}."""
    if not value:
        return frozenset()
    return frozenset(part.strip().lower() for part in str(value).split(",") if part.strip())


def node_annotation_faults(node: Mapping[str, Any] | None) -> frozenset[str]:
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    return parse_faults(annotations.get(FAULTS_ANNOTATION))


def configmap_entries(configmap: Mapping[str, Any] | None) -> dict[str, frozenset[str]]:
    """The ConfigMap's data as {node name or `*`/`_all`: faults}, entries without faults left out."""
    data = (configmap or {}).get("data") or {}
    out = {str(k).strip(): parse_faults(v) for k, v in data.items()}
    return {k: v for k, v in out.items() if v}


def format_entries(entries: Mapping[str, frozenset[str]]) -> str:
    return "; ".join(f"{k}: {','.join(sorted(v))}" for k, v in sorted(entries.items()))


def resolve(node_name: str, node: Mapping[str, Any] | None, configmap: Mapping[str, Any] | None) -> frozenset[str]:
    """The faults of `node_name` given its Node object and the faults ConfigMap (either may be None)."""
    entries = configmap_entries(configmap)
    result = set(node_annotation_faults(node))
    result |= entries.get(node_name, frozenset())
    for key in ALL_NODES_KEYS:
        result |= entries.get(key, frozenset())
    return frozenset(result)


class FaultStore:
    """Looks faults up from the current Node and ConfigMap (through the two getters, which read the
    simulator's caches) and warns once per unknown fault name."""

    def __init__(
        self,
        get_node: Callable[[str], Mapping[str, Any] | None],
        get_configmap: Callable[[], Mapping[str, Any] | None],
        known: Iterable[str] = (),
        *,
        log: logging.Logger = LOG,
    ) -> None:
        self._get_node = get_node
        self._get_configmap = get_configmap
        self.known: set[str] = {k.lower() for k in known}
        self.log = log
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def register(self, names: Iterable[str]) -> None:
        with self._lock:
            self.known |= {n.lower() for n in names}

    def validate(self, *fault_sets: Iterable[str]) -> None:
        """Warn (once per name) about fault names no handler knows."""
        unknown: list[str] = []
        with self._lock:
            for faults in fault_sets:
                for name in faults:
                    if name not in self.known and name not in self._warned:
                        self._warned.add(name)
                        unknown.append(name)
        for name in sorted(unknown):
            self.log.warning("unknown fault %r (known: %s); ignored", name, ", ".join(sorted(self.known)) or "none")

    def configmap_faults(self, node_name: str) -> frozenset[str]:
        return resolve(node_name, None, self._get_configmap())

    def faults_for(self, node_name: str) -> frozenset[str]:
        faults = resolve(node_name, self._get_node(node_name), self._get_configmap())
        self.validate(faults)
        return faults

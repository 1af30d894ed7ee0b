"""NfdWorkerHandler: plays nfd-worker (Node Feature Discovery v0.19) on kwok nodes. The real nfd-master
(built from its Go module, started by the lab) turns what this publishes into node labels, and evaluates
every NodeFeatureRule (the charts' and the roles') against the features, so labels and rules go through
upstream code.

What it writes (upstream behaviour unless marked *sim*):

- Per node with a hardware profile (label `gpuops.io/hardware-profile`), one `NodeFeature`
  (nfd.k8s-sigs.io/v1alpha1) named after the node, label `nfd.node.kubernetes.io/node-name: <node>`,
  in the lab's NFD namespace (`gpuops-lab-nfd`, where the lab's nfd-master runs), with
  `spec.features` as nfd-worker's sources report them on that hardware (`pci.device` instances with
  class/vendor/device and sriov_totalvfs, `kernel.version`, `kernel.loadedmodule`, `cpu.model`,
  `system.osrelease`) and `spec.labels` as nfd-worker's label sources derive them with the worker
  configuration of the `nfd` role (PCI class whitelist, vendor-only device labels):
  `feature.node.kubernetes.io/pci-<vendor>.present`, `...pci-<vendor>.sriov.capable`, kernel, CPU
  vendor and OS labels (profiles.nfd_labels).
- The NodeFeature is owned by its Node (*sim*: upstream nfd-gc deletes the NodeFeatures of deleted
  nodes; the garbage collector does it here), and is deleted when the node is gone or loses its profile.
- Nodes without a hardware profile (the lab's control-plane node) get nothing.
- *sim*: while the NodeFeature API is not served (no NFD CRDs: NFD was uninstalled), nothing is
  published; the handler retries and publishes again once an NFD release (or the lab, when nodes are
  added) installs the CRDs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...nfd import NAMESPACE as NFD_NAMESPACE
from ...profiles import PROFILE_LABEL, node_feature_spec
from ..framework import NAMESPACE, NODE, ApiError, Cache, Context, Handler, Key, Kind, Obj
from .nvidia import NODE_FEATURE, NODE_NAME_LABEL, labels_of, load_profile

NOT_SERVED_RETRY = 5.0


def node_feature(node: Obj, profile: dict[str, Any], namespace: str = NFD_NAMESPACE) -> Obj:
    """The NodeFeature nfd-worker would publish for this node (owned by the node)."""
    meta = node.get("metadata") or {}
    return {
        "apiVersion": NODE_FEATURE.api_version,
        "kind": NODE_FEATURE.kind,
        "metadata": {"name": meta["name"], "namespace": namespace, "labels": {NODE_NAME_LABEL: meta["name"]}},
        "spec": node_feature_spec(profile),
    }


class NfdWorkerHandler(Handler):
    """nfd-worker on every simulated node (see the module docstring)."""

    name = "NfdWorker"
    primary = NODE
    watches: Iterable[Kind] = (NODE_FEATURE,)

    def __init__(self, namespace: str = NFD_NAMESPACE) -> None:
        self.namespace = namespace
        self._not_served_logged = False

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        node = labels_of(obj).get(NODE_NAME_LABEL)
        return [Key(None, node)] if node else []

    def _ensure_namespace(self, ctx: Context) -> None:
        if ctx.get(NAMESPACE, self.namespace) is None:
            ctx.apply_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}, None)

    def reconcile(self, ctx: Context, key: Key) -> float | None:
        node = ctx.primary
        profile_name = labels_of(node).get(PROFILE_LABEL) if node else None
        profile = load_profile(profile_name) if profile_name else None
        try:
            if node is None or profile is None or (node.get("metadata") or {}).get("deletionTimestamp"):
                if ctx.get(NODE_FEATURE, key.name, self.namespace) is not None:
                    ctx.delete_object(NODE_FEATURE, key.name, self.namespace)
                return None
            self._ensure_namespace(ctx)
            ctx.apply_object(node_feature(node, profile, self.namespace), node)
        except ApiError as exc:
            if exc.status != 404:
                raise
            if not self._not_served_logged:
                ctx.log("NodeFeature API not served (NFD CRDs not installed): %s; retrying", exc)
                self._not_served_logged = True
            return NOT_SERVED_RETRY
        self._not_served_logged = False
        return None

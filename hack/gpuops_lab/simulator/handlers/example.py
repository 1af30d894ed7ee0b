"""FakeDevicePlugin: an EXAMPLE handler proving the simulator framework. It is not the behaviour of any
upstream component, although it plays the visible part of a Kubernetes device plugin: extended
resources appearing on a node while the plugin's pod runs there.

Contract:

- A DaemonSet opts in with the label `sim.gpuops.io/advertises` (any value, e.g. "true") and the
  annotation of the same name listing what its pods advertise: `example.com/widget=2` (several:
  `example.com/widget=2,example.com/gadget=1`). The list lives in an annotation because label values
  cannot contain `/` or `=`.
- On each node where a pod of such a DaemonSet is Running and Ready (and not being deleted), the node's
  status capacity and allocatable get those resources (summed when several DaemonSets advertise the same
  one). When no such pod is ready there any more, they are removed again.
- Fault `device-plugin-unhealthy` on a node: nothing is advertised there (as if the plugin reported its
  devices unhealthy).
- The node annotation `sim.gpuops.io/fake-device-plugin` records which resources this handler put on
  the node, so they are removed after a DaemonSet is deleted, even across simulator restarts; resources
  put there by anything else are never touched.

`FakeDevicePlugin(label=..., owned_annotation=...)` uses another label/annotation key (the integration
test does, so it stays independent of any other simulator running against the same cluster).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..framework import DAEMONSET, NODE, POD, Cache, Context, Handler, Key, Obj

ADVERTISES = "sim.gpuops.io/advertises"
OWNED_ANNOTATION = "sim.gpuops.io/fake-device-plugin"
FAULT_UNHEALTHY = "device-plugin-unhealthy"


def parse_advertises(value: str | None) -> dict[str, int]:
    """`"example.com/widget=2, example.com/gadget=1"` -> {"example.com/widget": 2, ...}; ValueError when
    malformed (resource names must be domain-prefixed, counts non-negative integers)."""
    out: dict[str, int] = {}
    for part in (value or "").split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, count = part.partition("=")
        name, count = name.strip(), count.strip()
        if not sep or "/" not in name or not count.isdigit():
            raise ValueError(f"{part!r} is not <domain>/<resource>=<count>")
        out[name] = out.get(name, 0) + int(count)
    return out


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def daemonset_owner(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == "DaemonSet" and str(ref.get("apiVersion", "")).startswith("apps/"):
            return ref
    return None


def owned_resources(node: Mapping[str, Any] | None, annotation: str = OWNED_ANNOTATION) -> set[str]:
    value = (((node or {}).get("metadata") or {}).get("annotations") or {}).get(annotation) or ""
    return {v.strip() for v in value.split(",") if v.strip()}


def desired_resources(
    node_name: str,
    pods: Iterable[Mapping[str, Any]],
    daemonsets: Mapping[Key, Mapping[str, Any]],
    faults: frozenset[str] | set[str],
    errors: list[str] | None = None,
    label: str = ADVERTISES,
) -> dict[str, int]:
    """What `node_name` should advertise: resources of DaemonSets opted in with `label` whose pod on
    that node is Running and Ready; nothing under fault device-plugin-unhealthy. Bad annotations go to
    `errors`."""
    if FAULT_UNHEALTHY in faults:
        return {}
    out: dict[str, int] = {}
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") != node_name or not is_pod_ready(pod):
            continue
        ref = daemonset_owner(pod)
        if ref is None:
            continue
        ds = daemonsets.get(Key((pod.get("metadata") or {}).get("namespace"), ref.get("name", "")))
        if ds is None or (ds.get("metadata") or {}).get("uid") not in (None, ref.get("uid")):
            continue
        meta = ds.get("metadata") or {}
        if label not in (meta.get("labels") or {}):
            continue
        try:
            resources = parse_advertises((meta.get("annotations") or {}).get(label))
        except ValueError as exc:
            if errors is not None:
                errors.append(f"DaemonSet {Key.of(ds)}: annotation {label}: {exc}")
            continue
        for name, count in resources.items():
            out[name] = out.get(name, 0) + count
    return out


def plan_node(
    node: Mapping[str, Any], desired: Mapping[str, int], annotation: str = OWNED_ANNOTATION
) -> dict[str, str | None]:
    """The capacity/allocatable changes turning `node` into one advertising `desired`: set what differs,
    remove (None) what this handler advertised before and no longer should."""
    status = node.get("status") or {}
    changes: dict[str, str | None] = {}
    for name, count in desired.items():
        if any(str((status.get(f) or {}).get(name)) != str(count) for f in ("capacity", "allocatable")):
            changes[name] = str(count)
    for name in sorted(owned_resources(node, annotation) - set(desired)):
        if any(name in (status.get(f) or {}) for f in ("capacity", "allocatable")):
            changes[name] = None
    return changes


class FakeDevicePlugin(Handler):
    """Example handler (see the module docstring): primary kind Node; Pods and DaemonSets map to the
    nodes their pods run on. `label` and `owned_annotation` can be changed so that a second instance
    (a test's) works independently of another simulator running the default one."""

    name = "FakeDevicePlugin"
    primary = NODE
    watches: Sequence = (POD, DAEMONSET)
    known_faults = frozenset({FAULT_UNHEALTHY})

    def __init__(self, label: str = ADVERTISES, owned_annotation: str = OWNED_ANNOTATION) -> None:
        self.label = label
        self.owned_annotation = owned_annotation
        self._reported: set[str] = set()

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        if obj.get("kind") == "Pod":
            node = (obj.get("spec") or {}).get("nodeName")
            if node and daemonset_owner(obj) is not None:
                return [Key(None, node)]
            return []
        if obj.get("kind") == "DaemonSet":
            meta = obj.get("metadata") or {}
            keys = []
            for pod in cache.list(POD, namespace=meta.get("namespace")):
                ref = daemonset_owner(pod)
                node = (pod.get("spec") or {}).get("nodeName")
                if ref is not None and node and (ref.get("uid") == meta.get("uid") or ref.get("name") == meta["name"]):
                    keys.append(Key(None, node))
            return keys
        return []

    def keys_for_fault_change(self, nodes: frozenset[str] | None, cache: Cache) -> Iterable[Key] | None:
        return None if nodes is None else [Key(None, n) for n in nodes]

    def reconcile(self, ctx: Context, key: Key) -> float | None:
        node = ctx.primary
        if node is None:
            return None
        faults = ctx.faults_for(key.name)
        errors: list[str] = []
        pods = [p for p in ctx.list(POD) if (p.get("spec") or {}).get("nodeName") == key.name]
        daemonsets = {Key.of(d): d for d in ctx.list(DAEMONSET, labels={self.label: None})}
        desired = desired_resources(key.name, pods, daemonsets, faults, errors, self.label)
        for err in errors:
            if err not in self._reported:
                self._reported.add(err)
                ctx.log("ignoring %s", err, level=logging.WARNING)
        changes = plan_node(node, desired, self.owned_annotation)
        owned = owned_resources(node, self.owned_annotation)
        if not changes and owned == set(desired):
            return None
        if FAULT_UNHEALTHY in faults and changes:
            ctx.log("fault %s on node %s: advertising nothing", FAULT_UNHEALTHY, key.name)
        if set(desired) - owned:
            # record ownership before advertising, so a crash in between cannot orphan a resource
            node = ctx.patch_metadata(node, annotations={self.owned_annotation: ",".join(sorted(owned | set(desired)))})
        if changes:
            node = ctx.patch_node_status(node, capacity=changes, allocatable=changes)
        if owned_resources(node, self.owned_annotation) != set(desired):
            ctx.patch_metadata(node, annotations={self.owned_annotation: ",".join(sorted(desired)) or None})
        return None

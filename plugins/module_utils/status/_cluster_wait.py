# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""GPU cluster status: waiting for objects and nodes - the targets of a wait, what is not ready yet, and the message
of a wait that ran out of time. The readiness predicates themselves are in ``_readiness`` (and
``_network_ready``, ``_sriov_ready``). Pure functions (no I/O).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput
from ansible_collections.gpuops.platform.plugins.module_utils.status import (
    _readiness,
    _sriov_ready,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._label_selectors import (
    parse_selector,
    selector_matches,
)


# -- waiting for objects and nodes (predicates in _readiness) ---------------------------------------------
def _labels_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def wait_targets(wait: Mapping[str, Any], params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The objects to wait for, namespaces defaulted: DeviceConfig -> amd_namespace, other namespaced kinds
    -> operator_namespace, cluster-scoped kinds -> None."""
    out = []
    for spec in wait.get("objects") or ():
        kind = spec["kind"]
        if kind not in _readiness.KINDS:
            raise InvalidInput(
                f"wait.objects: unknown kind {kind!r}; known kinds: {', '.join(sorted(_readiness.KINDS))}", kind=kind
            )
        namespace = None
        if _readiness.KINDS[kind].namespaced:
            default = params["amd_namespace"] if kind == "DeviceConfig" else params["operator_namespace"]
            namespace = spec.get("namespace") or default
        out.append(
            {
                "kind": kind,
                "name": spec.get("name"),
                "namespace": namespace,
                "label_selector": spec.get("label_selector"),
                "selector": parse_selector(spec.get("label_selector")),
            }
        )
    return out


def _listed(
    reader: Any,
    raw: Mapping[str, Any],
    params: Mapping[str, Any],
    cache: dict[tuple[str, str | None], Any],
    kind: str,
    namespace: str | None,
) -> list[dict[str, Any]] | None:
    """The objects of ``kind`` in ``namespace``: from the snapshot already listed when it holds them (the
    ClusterPolicy is read once per look), else one list request per (kind, namespace) and look."""
    if kind == "ClusterPolicy":
        return raw["cluster_policies"]
    if kind == "DeviceConfig" and namespace == params["amd_namespace"]:
        return raw["device_configs"]
    if kind == "DaemonSet" and namespace == params["operator_namespace"]:
        return raw["daemonsets"]
    if (kind, namespace) not in cache:
        k = _readiness.KINDS[kind]
        cache[(kind, namespace)] = reader.objects(k.group, k.version, k.plural, namespace)
    return cache[(kind, namespace)]


def not_ready(
    reader: Any,
    raw: Mapping[str, Any],
    view: Mapping[str, Any],
    params: Mapping[str, Any],
    targets: Iterable[Mapping[str, Any]],
    nodes: bool = True,
) -> list[_readiness.NotReady]:
    """Every wanted object that is missing or not ready, then (``nodes``) every GPU node of the view that is
    not ready, as _readiness.NotReady."""
    out: list[_readiness.NotReady]
    cache: dict[tuple[str, str | None], Any]
    out, cache = [], {}
    for t in targets:
        kind, ns, name = t["kind"], t["namespace"], t["name"]
        items = _listed(reader, raw, params, cache, kind, ns)
        k = _readiness.KINDS[kind]
        label = name or (f"with labels {t['label_selector']}" if t["label_selector"] else "*")
        if items is None:
            out.append(_readiness.NotReady(kind, ns, label, f"CRD {k.plural}.{k.group} is not installed"))
            continue
        chosen = [
            o
            for o in items
            if (name is None or (o.get("metadata") or {}).get("name") == name)
            and (t["selector"] is None or selector_matches(t["selector"], _labels_of(o)))
        ]
        if not chosen:
            where = f" in namespace {ns}" if ns else ""
            out.append(_readiness.NotReady(kind, ns, label, f"no such {kind}{where}"))
            continue
        out.extend(n for n in (_readiness.judge(kind, o) for o in chosen) if n is not None)
    if nodes:
        for node in view["nodes"]:
            unmet = _readiness.gpu_node(node)
            if unmet is not None:
                out.append(_readiness.NotReady("Node", None, node["name"], unmet))
    return out


def sriov_not_ready(
    reader: Any, raw: Mapping[str, Any], params: Mapping[str, Any], wait: Mapping[str, Any]
) -> list[_readiness.NotReady]:
    """What ``wait.sriov_policies`` still waits for: each policy the operator has not written into a
    SriovNetworkNodeState yet, then each node a policy selects without the policy's resource allocatable
    (_sriov_ready.unapplied_policies, expected_resources, node_resource). What ``wait.sriov_policies_removed`` (the
    policies just deleted) waits for: no state's spec names them any more, and no PF they selected still has VFs
    (_sriov_ready.lingering_policies, unreset_pfs). One more list per look, none without policies."""
    unmet: str | None
    policies = wait.get("sriov_policies") or []
    removed = wait.get("sriov_policies_removed") or []
    if not policies and not removed:
        return []
    ns = wait.get("sriov_namespace") or params["operator_namespace"]
    k = _readiness.KINDS["SriovNetworkNodeState"]
    states = reader.objects(k.group, k.version, k.plural, ns) or []
    out = [
        _readiness.NotReady("SriovNetworkNodePolicy", ns, name, "not yet written into a SriovNetworkNodeState")
        for name in _sriov_ready.unapplied_policies(policies, states)
    ]
    out += [
        _readiness.NotReady(
            "SriovNetworkNodePolicy", ns, name, "deleted, still written into a SriovNetworkNodeState's spec"
        )
        for name in _sriov_ready.lingering_policies(removed, states)
    ]
    if removed:
        labels = {
            (n.get("metadata") or {}).get("name"): (n.get("metadata") or {}).get("labels") or {} for n in raw["nodes"]
        }
        for state in states:
            name = (state.get("metadata") or {}).get("name")
            for unmet in _sriov_ready.unreset_pfs(removed, state, labels.get(name)):
                out.append(_readiness.NotReady("SriovNetworkNodeState", ns, cast(str, name), unmet))
    prefix = wait.get("sriov_resource_prefix") or "openshift.io"
    for node in raw["nodes"]:
        for name in _sriov_ready.expected_resources(policies, node, prefix):
            unmet = _sriov_ready.node_resource(node, name)
            if unmet:
                out.append(
                    _readiness.NotReady("Node", None, cast(str, (node.get("metadata") or {}).get("name")), unmet)
                )
    return out


def wait_failure_message(outcome: Any, timeout: float, findings: Iterable[Mapping[str, Any]]) -> str:
    """The objects and conditions not ready, what to do per kind, and the error findings that explain them."""
    kinds = sorted({n.kind for n in outcome.not_ready})
    hints = [f"{k}: {_readiness.KINDS[k].hint}" for k in kinds if k in _readiness.KINDS]
    if "Node" in kinds:
        hints.append("Node: the diagnosis findings name the cause per node")
    msg = _readiness.timeout_message(outcome, timeout) + ". Fix: " + "; ".join(hints)
    errors = [f for f in findings if f["severity"] == "error"]
    if errors:
        msg += ". Error findings: " + " ".join(
            f"[{f['id']}] {f['node'] or f['object']['name']}: {f['cause']} -> {f['fix']}." for f in errors
        )
    return msg

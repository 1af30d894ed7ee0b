# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The gpu_sharing role's plan, one call (module ``gpu_sharing_plan``): the input rules, and from the cluster as it
is the pool members, guards, ConfigMap entries, node label patches, expected capacity, the device-plugin restart and
the fields handed to the gpu_operator role. ``read`` does the I/O with a reader (``_k8s.Reader``); everything else is
a pure function of what it read.

What the plan can judge before the run's first change: every rule of the variables and the inventory (input
findings), the pools' members by inventory group or by the labels the nodes carry now, a MIG name against the GPU
model of each member whose model is known (host facts gathered earlier in the run, or GPU Feature Discovery's
``nvidia.com/gpu.product`` label of a node the GPU Operator already labelled), the DRA guards against the API server
and the known driver versions, and a MIG change under running GPU pods. A node whose GPU model is not known yet (a
fresh cluster, before the host plane gathered facts and before the GPU Operator labelled it) cannot be judged: that
is a warning, and the role judges it again before its own first change."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.host import _gpu_catalog
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _capacity, _labels, _mig, _pools
from ansible_collections.gpuops.platform.plugins.module_utils.sharing._pools import _bad, _finding
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_views as _cluster_status
from ansible_collections.gpuops.platform.plugins.module_utils.status import _sharing_status as _status

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    yaml = None

Finding = dict[str, Any]
# the pool rules whose subject an earlier layer of the same run may still create: warnings while the run plans
_LATER_LAYER_IDS = ("sharing-pool-empty", "sharing-dra-driver-too-old")
_NODE_LABEL_PREFIXES = ("feature.node.kubernetes.io/", "nvidia.com/")  # what NFD and the GPU Operator label


def yaml_text(document: Any) -> str:
    """A document as the ConfigMaps hold it (block style, sorted keys)."""
    if yaml is None:  # pragma: no cover - PyYAML comes with ansible-core
        raise ImportError("PyYAML is required (it comes with ansible-core)")
    return str(yaml.safe_dump(document, default_flow_style=False, sort_keys=True))


def _generated_names() -> set[str]:
    """Every MIG config name mig-manager generates on some GPU of the catalog."""
    out: set[str] = set()
    for vendor, device in _gpu_catalog.GPUS:
        out.update(_gpu_catalog.mig_config_names(vendor, device))
    return out


def mig_name_findings(pools: Any, mig_configs: Any) -> list[Finding]:
    """Without custom configs, a MIG pool's name must be one mig-manager generates on some GPU at all (a typo such as
    all-1g.10g is refused from the variables alone, before the GPU models are known)."""
    if mig_configs or not isinstance(pools, list):
        return []
    known = _generated_names()
    out = []
    for i, pool in enumerate(pools):
        if not isinstance(pool, Mapping) or pool.get("model") != "mig":
            continue
        name = pool.get("mig_config")
        if isinstance(name, str) and name and name not in known:
            out.append(
                _bad(
                    f"{_pools.VAR_POOLS}[{i}].mig_config",
                    name,
                    "No GPU has a MIG layout of this name: mig-manager v0.15.0 generates all-disabled, all-enabled, "
                    "all-balanced and all-<profile> from the GPU's profiles (_gpu_catalog).",
                    "Use a name such as all-1g.10gb (H100 80GB) or all-balanced, or define the layout in "
                    f"{_pools.VAR_MIG_CONFIGS}.",
                )
            )
    return out


def input_findings(variables: Mapping[str, Any], groups: Mapping[str, Sequence[str]] | None) -> list[Finding]:
    """The rules of the role's variables and of the inventory alone (no cluster): each pool field by field, the
    custom MIG configs, MIG names no GPU has, and with ``groups`` what the inventory settles about group pools."""
    groups = None if groups is None else {str(g): [str(h) for h in hosts or []] for g, hosts in groups.items()}
    pools = variables.get(_pools.VAR_POOLS)
    mig_configs = variables.get(_pools.VAR_MIG_CONFIGS)
    found = _pools.pool_input_findings(pools, variables.get(_pools.VAR_MIG_STRATEGY, "single"), groups)
    found += _mig.mig_configs_input_findings(mig_configs)
    return found + mig_name_findings(pools, mig_configs)


def gpu_operator_fields(
    present: bool, config_map: str, mig_strategy: str, mig_config_map: str, mig_configs: Any
) -> dict[str, str]:
    """What the gpu_operator role takes from the sharing layer (one owner per field: the ClusterPolicy is the GPU
    Operator release's): the device-plugin ConfigMap and its default entry, the MIG strategy, and the custom MIG
    ConfigMap when there are custom configs."""
    return {
        "gpu_operator_device_plugin_config_name": config_map if present else "",
        "gpu_operator_device_plugin_config_default": _pools.EXCLUSIVE_ENTRY if present else "",
        "gpu_operator_mig_strategy": mig_strategy,
        "gpu_operator_mig_manager_config_name": mig_config_map if present and mig_configs else "",
    }


def handoff_warnings(fields: Mapping[str, Any], inventory: Mapping[str, Any]) -> list[str]:
    """One warning per field the hand-off sets to another value than the inventory gives (``inventory``: the
    gpu_operator_* values the user set, unset ones left out): the hand-off wins, and says so."""
    return [
        f"{name}: the inventory sets {inventory[name]!r}, the sharing layer hands {value!r} to the gpu_operator role, "
        "which uses the hand-off (an extra var would still win). The gpu_sharing_* variables decide this field: set "
        "the gpu_sharing one instead, or remove the gpu_operator one."
        for name, value in sorted(fields.items())
        if name in inventory and inventory[name] is not None and str(inventory[name]) != str(value)
    ]


def read(reader: Any, params: Mapping[str, Any], mig_change_nodes: Sequence[str] | None = None) -> dict[str, Any]:
    """The cluster as the plan needs it: the nodes, the API server's version and served resource.k8s.io versions,
    the device-plugin ConfigMap and pods (the restart); with ``mig_change_nodes`` only the pods of those nodes."""
    if mig_change_nodes is not None:
        pods: list[dict[str, Any]] = []
        for node in mig_change_nodes:
            query = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={node}"})
            pods += (reader.get(f"pods on node {node}", f"/api/v1/pods?{query}", verb="list") or {}).get("items") or []
        return {"pods": pods}
    group = reader.get_optional("the resource.k8s.io API group", "/apis/resource.k8s.io") or {}
    raw: dict[str, Any] = {
        "nodes": reader.nodes(),
        "version": str((reader.get("the API server's version", "/version") or {}).get("gitVersion") or ""),
        "served": sorted(str(v.get("version")) for v in group.get("versions") or () if v.get("version")),
        "config_map": None,
        "device_plugin_pods": [],
    }
    if params["state"] == "present":
        ns, name = params["namespace"], params["config_map"]
        raw["config_map"] = reader.get_optional(
            f"ConfigMap {ns}/{name}", f"/api/v1/namespaces/{ns}/configmaps/{urllib.parse.quote(name)}"
        )
        selector = urllib.parse.urlencode({"labelSelector": f"app={_labels.DEVICE_PLUGIN_APP}"})
        got = reader.get_optional(f"device-plugin pods in {ns}", f"/api/v1/namespaces/{ns}/pods?{selector}") or {}
        raw["device_plugin_pods"] = got.get("items") or []
    return raw


def _unknown_gpu_findings(
    pools: Sequence[Mapping[str, Any]], members: Mapping[str, Sequence[str]], known: Mapping[str, bool]
) -> list[Finding]:
    """A MIG pool's node whose GPUs are not known (no host facts, no GPU Feature Discovery product label): its MIG
    name cannot be judged yet - a warning naming what would tell."""
    out = []
    for pool in pools:
        if pool.get("model") != "mig":
            continue
        unknown = [n for n in members.get(pool["name"], ()) if not known.get(n)]
        if unknown:
            finding = _finding(
                "sharing-gpu-model-unknown",
                "variable",
                f"{_pools.VAR_POOLS}[{pool['name']}].mig_config",
                [
                    f"mig_config: {pool['mig_config']}",
                    f"GPU model not known on {', '.join(unknown)}: "
                    f"no gpuops_host facts, no {_status.GPU_PRODUCT_LABEL} label",
                ],
                "The MIG name can be judged only against the GPU model, which the host facts (gathered by the host "
                "plane) or GPU Feature Discovery's labels (after the GPU Operator) give.",
                "Nothing to do now: the role judges it before its own first change when the facts are gathered; "
                "check the name in docs/sharing.md for the GPU model of these nodes.",
            )
            finding["severity"] = "warning"
            out.append(finding)
    return out


def _later_layer(finding: Finding, pools: Sequence[Mapping[str, Any]]) -> bool:
    """While the run plans: a finding whose subject an earlier layer of the run may still create - a node-selector
    pool that selects on labels NFD or the GPU Operator write, a DRA node's driver not known yet."""
    if finding["id"] == "sharing-dra-driver-too-old":
        return "not found" in " ".join(finding["evidence"])
    if finding["id"] != "sharing-pool-empty":
        return False
    for pool in pools:
        if f"[{pool['name']}]" in finding["object"]["name"] and pool.get("node_selector"):
            return any(str(k).startswith(_NODE_LABEL_PREFIXES) for k in pool["node_selector"])
    return False


def plan(params: Mapping[str, Any], raw: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The plan from the role's parameters and what ``read`` returned (``pods``: those of the MIG change nodes)."""
    present = params["state"] == "present"
    pools = list(params["pools"] or []) if present else []
    strategy = params["mig_strategy"]
    mig_configs = dict(params.get("mig_configs") or {}) if present else {}
    groups = params.get("groups") or {}
    nodes = list(raw["nodes"])
    by_name: dict[Any, Any] = {(n.get("metadata") or {}).get("name"): n for n in nodes}
    member_input: dict[Any, dict[str, Any]] = {
        name: {
            "labels": (n.get("metadata") or {}).get("labels") or {},
            "groups": [g for g, hosts in groups.items() if name in (hosts or ())],
        }
        for name, n in by_name.items()
    }
    members, findings = _pools.pool_members(pools, member_input)
    facts = _cluster_status.match_host_facts(params.get("host_facts") or {}, list(by_name))
    gpus = {name: _status.nvidia_gpus(facts.get(name), member_input[name]["labels"], mig_configs) for name in by_name}
    findings += _mig.mig_findings(pools, members, gpus, mig_configs)
    known = {n: bool(facts.get(n)) or bool(member_input[n]["labels"].get(_status.GPU_PRODUCT_LABEL)) for n in by_name}
    findings += _unknown_gpu_findings(pools, members, known)
    findings += _mig.mig_strategy_findings(pools, members, gpus, strategy, mig_configs)
    drivers = {name: _status.driver_version(facts.get(name), member_input[name]["labels"]) for name in by_name}
    findings += _pools.dra_findings(pools, members, raw["version"], raw["served"], drivers)
    configs = {entry: yaml_text(cfg) for entry, cfg in _pools.device_plugin_configs(pools).items()}
    labels = _labels.label_plan(nodes, pools, members)
    findings += _labels.mig_change_findings(
        labels, _status.gpu_pods(pods), bool(params.get("allow_mig_change_with_gpu_pods"))
    )
    if params.get("planning"):
        for finding in findings:
            if finding["severity"] == "error" and _later_layer(finding, pools):
                finding["severity"] = "warning"
                finding["evidence"] = [*finding["evidence"], "the run plans: an earlier layer may still create it"]
    restart = _labels.restart_plan(raw.get("config_map"), configs, nodes, labels, raw.get("device_plugin_pods") or [])
    # the custom MIG ConfigMap's config.yaml (mig-parted v1), empty without custom configs
    mig_parted = yaml_text(_mig.mig_parted_config(mig_configs)) if mig_configs else ""
    return {
        "members": members,
        "findings": findings,
        "configs": configs,
        "mig_parted_config": mig_parted,
        "labels": labels,
        "expected": {
            node: _capacity.expected_capacity(pool, gpus[node], strategy, mig_configs)
            for pool in pools
            for node in members.get(pool["name"], ())
        },
        "mig_change_nodes": _labels.mig_change_nodes(labels),
        "mig_nodes": sorted(n for p in pools if p.get("model") == "mig" for n in members.get(p["name"], ())),
        "dra_nodes": sorted(n for p in pools if p.get("model") == "dra" for n in members.get(p["name"], ())),
        "restart": restart,
        **config_objects(params, configs, mig_parted, restart),
    }


OWNER_LABELS = _owned.owner_labels("gpu_sharing")
# the GPU Operator's operands are privileged: the same labels as the gpu_operator role's namespace
PRIVILEGED = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")}


def config_objects(
    params: Mapping[str, Any], configs: Mapping[str, str], mig_parted: str, restart: Mapping[str, Any]
) -> dict[str, Any]:
    """What the role applies in one task (gpuops.platform.k8s_apply): ``objects`` - the GPU Operator's namespace (on
    a fresh cluster this role runs before gpu_operator), the device plugin's ConfigMap (an entry per time-slicing or
    MPS pool, and exclusive; the device-plugin pods to restart in its annotation, written with it) and, with custom
    MIG configs, mig-parted's ConfigMap - none with state absent; and ``prune``, which deletes the role's
    ConfigMaps the objects do not hold (the MIG one without custom configs; both with state absent; the namespace is
    never the role's to delete)."""
    namespace = str(params.get("namespace") or "gpu-operator")
    prune = _owned.prune_spec(OWNER_LABELS, [("v1", "ConfigMap", namespace)])
    if params.get("state", "present") != "present":
        return {"objects": [], "prune": prune}

    def config_map(name: str, data: Mapping[str, str], annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(OWNER_LABELS)}
        if annotations is not None:
            meta["annotations"] = dict(annotations)
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}

    stale = {_labels.STALE_ANNOTATION: str(restart.get("annotation") or "[]")}
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": dict(PRIVILEGED)}},
        config_map(str(params.get("config_map") or "gpu-sharing-device-plugin"), configs, stale),
    ]
    if mig_parted:
        objects.append(
            config_map(str(params.get("mig_config_map") or "gpu-sharing-mig-parted"), {"config.yaml": mig_parted})
        )
    return {"objects": objects, "prune": prune}


def summary(pools: Sequence[Mapping[str, Any]], result: Mapping[str, Any]) -> list[str]:
    """One line per pool: its nodes and the capacity each will advertise; time-slicing's missing isolation said."""
    lines = [
        f"{p['name']} ({p['model']}): "
        + (", ".join(f"{n} {result['expected'].get(n, {})}" for n in result["members"].get(p["name"], ())) or "no node")
        for p in pools
    ]
    if any(p.get("model") == "time_slicing" for p in pools):
        lines.append("Time-slicing gives no memory or fault isolation between the pods sharing a GPU.")
    return lines


def message(finding: Mapping[str, Any]) -> str:
    obj = finding.get("object") or {}
    return (
        f"[{finding['id']}] {obj.get('kind')} {obj.get('name')}: {finding['cause']} Fix: {finding['fix']} "
        f"({'; '.join(finding.get('evidence') or ())})"
    )

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""GPU sharing per node pool: the pool rules (inputs, members, DRA guards) and the device-plugin entries (no I/O).

A pool is an inventory group or a node label selector plus one model: ``exclusive``, ``time_slicing``, ``mps``,
``mig``, ``dra`` or ``kai_fraction`` (whole GPUs from the device plugin that KAI Scheduler hands out in fractions:
its ``global.gpuSharing``, decided in ``_kai.gpu_sharing``; KAI itself is required by
``_inputs_choices.batch_schedulers``). The sharing rules live in this package, one concern per file; here:

- :func:`pool_input_findings`: bad input before any change (each finding names the variable and the field).
- :func:`pool_members`: which nodes each pool holds; a node in two pools and a pool matching no node are findings.
- :func:`dra_findings`: Kubernetes >= 1.34 with ``resource.k8s.io/v1`` served, NVIDIA driver >= 580 on the hosts.
- :func:`device_plugin_configs`: the k8s-device-plugin config entries (``version: v1``), one per time-slicing or
  MPS pool, plus ``exclusive`` (the default for every other node).

The MIG rules are in ``_mig.py``, the capacity a node advertises in ``_capacity.py``, the owned node labels and the
device-plugin restart in ``_labels.py``, the role's plan in one call in ``_plan.py``, the status in ``_status.py``.

Upstream facts (NVIDIA/k8s-device-plugin v0.20.0): ``api/config/v1/replicas.go`` refuses ``replicas < 2`` and a
``devices`` count below 1, and ignores a per-resource ``rename`` ("not yet supported"), so only
``renameByDefault`` (``<name>.shared``) is offered; ``api/config/v1/config.go`` DisableResourceNamingInConfig resets a
``devices`` selection to all (so ``devices`` other than ``all`` is refused: it would be ignored);
``cmd/nvidia-device-plugin/main.go`` refuses
``--mig-strategy=mixed`` with MPS and ``internal/plugin/mps.go`` MPS on MIG devices; MPS's
``failRequestsGreaterThanOne`` defaults to true; ``internal/rm/rm.go`` names MIG resources ``mig-<profile>`` with
'+' replaced by '.'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.inputs import _inputs

Finding = dict[str, Any]

DEPLOY_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"  # the GPU Operator's device plugin on or off per node
VAR_POOLS = "gpu_sharing_pools"
VAR_MIG_STRATEGY = "gpu_sharing_mig_strategy"
VAR_MIG_CONFIGS = "gpu_sharing_mig_configs"
MIG_DISABLED = "all-disabled"  # the name the role sets on nodes leaving a MIG pool (and the operator's default)
MODELS = ("exclusive", "time_slicing", "mps", "mig", "dra", "kai_fraction")
MIG_STRATEGIES = ("single", "mixed")
EXCLUSIVE_ENTRY = "exclusive"  # the device-plugin config entry of every node outside a time-slicing/MPS pool
GPU = "nvidia.com/gpu"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
# the nodes of kai_fraction pools: whole GPUs that KAI Scheduler shares; fractional pods select the label
KAI_FRACTION_LABEL = "gpuops.platform/sharing-kai-fraction"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
DRA_MIN_KUBERNETES = (1, 34)
DRA_MIN_DRIVER = 580

_COMMON_KEYS = ("name", "model", "group", "node_selector")
_KEYS = {
    "exclusive": (),
    "time_slicing": ("replicas", "rename_by_default", "fail_requests_greater_than_one", "devices"),
    "mps": ("replicas", "rename_by_default", "fail_requests_greater_than_one", "devices"),
    "mig": ("mig_config",),
    "dra": (),
    "kai_fraction": (),
}
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def _bad(var: str, value: Any, cause: str, fix: str, *evidence: str) -> Finding:
    return _inputs.variable_finding("sharing-input-invalid", var, value, cause, fix, *evidence)


def _finding(fid: str, kind: str, name: str, evidence: Iterable[str], cause: str, fix: str) -> Finding:
    return {
        "id": fid,
        "severity": "error",
        "object": {"kind": kind, "name": name},
        "evidence": list(evidence),
        "cause": cause,
        "fix": fix,
    }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _devices_findings(var: str, devices: Any) -> list[Finding]:
    if devices == "all":
        return []
    return [
        _bad(
            var,
            devices,
            "The pinned device plugin (k8s-device-plugin v0.20.0) ignores a devices selection: "
            "api/config/v1/config.go DisableResourceNamingInConfig resets it to all with a warning, so every GPU of "
            "the pool's nodes would be shared anyway.",
            "Remove devices (or set devices: all); put the GPUs to keep whole in another pool.",
        )
    ]


def _pool_findings(i: int, pool: Any) -> list[Finding]:
    var = f"{VAR_POOLS}[{i}]"
    if not isinstance(pool, Mapping):
        return [
            _bad(var, pool, f"A pool is a mapping, not {_inputs.a(_inputs.kind_of(pool))}.", "See docs/sharing.md.")
        ]
    out: list[Finding] = []
    name, model = pool.get("name"), pool.get("model")
    if not isinstance(name, str) or not _NAME_RE.match(name) or len(name) > 63:
        out.append(
            _bad(
                f"{var}.name",
                name,
                "The pool name becomes a device-plugin config entry and a label value: a DNS-1123 label "
                "(lower-case letters, digits, '-', at most 63 characters).",
                "Name the pool like l40s-shared.",
            )
        )
    elif name == EXCLUSIVE_ENTRY and model != "exclusive":
        out.append(
            _bad(
                f"{var}.name",
                name,
                f"'{EXCLUSIVE_ENTRY}' is the config entry of the nodes outside every sharing pool.",
                "Give the pool another name.",
            )
        )
    if model not in MODELS:
        out.append(
            _bad(f"{var}.model", model, f"Unknown sharing model; the models are {', '.join(MODELS)}.", "Pick one.")
        )
        return out
    has_group, has_sel = pool.get("group") is not None, pool.get("node_selector") is not None
    if has_group == has_sel:
        out.append(
            _bad(
                var,
                {k: pool.get(k) for k in ("group", "node_selector")},
                "A pool names its nodes one way: an inventory group or a node label selector.",
                "Set exactly one of group and node_selector.",
            )
        )
    elif has_group and not (isinstance(pool["group"], str) and pool["group"]):
        out.append(_bad(f"{var}.group", pool["group"], "group is an inventory group name.", "Set a group name."))
    elif has_sel and not (
        isinstance(pool["node_selector"], Mapping)
        and pool["node_selector"]
        and all(isinstance(k, str) and isinstance(v, str) for k, v in pool["node_selector"].items())
    ):
        out.append(
            _bad(
                f"{var}.node_selector",
                pool["node_selector"],
                "node_selector is a non-empty mapping of label names to string values.",
                "Quote values such as 'true'.",
            )
        )
    known = set(_COMMON_KEYS) | set(_KEYS[model])
    for key in sorted(set(pool) - known):
        out.append(
            _bad(
                f"{var}.{key}",
                pool[key],
                f"Model {model} has no field {key}; its fields are {', '.join(sorted(known))}. A value no "
                "component reads would be silently ignored.",
                f"Remove {key} or change the model.",
            )
        )
    if model in ("time_slicing", "mps"):
        replicas = pool.get("replicas")
        if not (isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 2):
            out.append(
                _bad(
                    f"{var}.replicas",
                    replicas,
                    "The device plugin refuses fewer than 2 replicas (k8s-device-plugin api/config/v1/replicas.go).",
                    "Set replicas to 2 or more, or use model exclusive.",
                )
            )
        for key in ("rename_by_default", "fail_requests_greater_than_one"):
            if key in pool and not isinstance(pool[key], bool):
                out.append(_bad(f"{var}.{key}", pool[key], f"{key} is a boolean.", "Use true or false (unquoted)."))
        if "devices" in pool:
            out += _devices_findings(f"{var}.devices", pool["devices"])
    if model == "mig" and not (isinstance(pool.get("mig_config"), str) and pool["mig_config"]):
        out.append(
            _bad(
                f"{var}.mig_config",
                pool.get("mig_config"),
                "A MIG pool needs the mig.config name to apply (for example all-1g.10gb on H100 80GB).",
                "Set mig_config.",
            )
        )
    return out


def _in_two_pools(owners: Mapping[str, Sequence[str]], what: str, fix: str) -> list[Finding]:
    """A finding per node (or inventory host) that more than one pool selects."""
    return [
        _finding(
            "sharing-node-in-two-pools",
            "Node",
            name,
            [f"{what} {name} is in pools {', '.join(pools)}"],
            "A node has one sharing model: one device-plugin config and one MIG layout.",
            fix,
        )
        for name, pools in sorted(owners.items())
        if len(pools) > 1
    ]


def group_pool_findings(pools: Sequence[Any], groups: Mapping[str, Sequence[str]]) -> list[Finding]:
    """What the inventory alone settles about pools that name a group (``groups``: group -> hosts, Ansible's
    ``groups``), before any change: a group the inventory does not have (with the nearest name), a group without
    hosts, and a host in two pools' groups (one node, two sharing models). Pools by node selector need the
    cluster's labels (:func:`pool_members`)."""
    import difflib

    out: list[Finding] = []
    owners: dict[str, list[str]] = {}
    for i, pool in enumerate(pools):
        if not isinstance(pool, Mapping) or not isinstance(pool.get("group"), str) or not pool["group"]:
            continue
        name, group = str(pool.get("name")), pool["group"]
        if group not in groups:
            near = difflib.get_close_matches(group, sorted(g for g in groups if g not in ("all", "ungrouped")), n=1)
            out.append(
                _finding(
                    "sharing-pool-group-unknown",
                    "variable",
                    f"{VAR_POOLS}[{i}].group",
                    [f"pool {name}: group {group}; the inventory's groups: {', '.join(sorted(groups)) or '(none)'}"],
                    "The inventory has no such group: the pool would select no node.",
                    f"did you mean {near[0]}? Set the pool's group to an inventory group of GPU hosts."
                    if near
                    else "Set the pool's group to an inventory group of GPU hosts, or add the group to the inventory.",
                )
            )
            continue
        if not groups[group]:
            out.append(
                _finding(
                    "sharing-pool-empty",
                    "variable",
                    f"{VAR_POOLS}[{i}].group",
                    [f"pool {name}: inventory group {group} has no hosts"],
                    "A pool that selects no node configures nothing, which is most likely a mistake.",
                    "Add the GPU hosts to the group, or remove the pool.",
                )
            )
        for host in groups[group]:
            owners.setdefault(str(host), []).append(f"{name} (group {group})")
    return out + _in_two_pools(owners, "host", "Narrow the pools' groups so that each GPU host is in one pool.")


def pool_input_findings(
    pools: Any, mig_strategy: Any = "single", groups: Mapping[str, Sequence[str]] | None = None
) -> list[Finding]:
    """Bad input before any change; with ``groups`` (the inventory's), also what it settles about group pools."""
    if not isinstance(pools, list):
        return [_bad(VAR_POOLS, pools, "The pools are a list.", "Write gpu_sharing_pools as a YAML list.")]
    out: list[Finding] = []
    if groups is not None:
        out += group_pool_findings(pools, groups)
    if mig_strategy not in MIG_STRATEGIES:
        out.append(_bad(VAR_MIG_STRATEGY, mig_strategy, "The MIG strategies are single and mixed.", "Pick one."))
    for i, pool in enumerate(pools):
        out += _pool_findings(i, pool)
    names = [p.get("name") for p in pools if isinstance(p, Mapping)]
    for dup in sorted({n for n in names if isinstance(n, str) and names.count(n) > 1}):
        out.append(
            _bad(VAR_POOLS, dup, f"Two pools are named {dup}; a name is one config entry.", "Rename one of them.")
        )
    if mig_strategy == "mixed":
        for i, pool in enumerate(pools):
            if isinstance(pool, Mapping) and pool.get("model") == "mps":
                out.append(
                    _bad(
                        f"{VAR_POOLS}[{i}].model",
                        "mps",
                        "The device plugin refuses MPS with the mixed MIG strategy (k8s-device-plugin "
                        "cmd/nvidia-device-plugin/main.go: 'using --mig-strategy=mixed is not supported with MPS').",
                        f"Set {VAR_MIG_STRATEGY}: single, or use time_slicing for this pool.",
                        f"{VAR_MIG_STRATEGY}: mixed",
                    )
                )
    return out


def _selects(selector: Mapping[str, str], labels: Mapping[str, Any] | None) -> bool:
    labels = labels or {}
    return all(k in labels and str(labels[k]) == v for k, v in selector.items())


def pool_members(
    pools: Sequence[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, list[str]], list[Finding]]:
    """Nodes per pool (sorted). ``nodes``: node name -> {labels, groups}. A node in two pools, or a pool that
    matches no node, is a finding."""
    members: dict[str, list[str]] = {}
    for pool in pools:
        if pool.get("group") is not None:
            got = [n for n, node in nodes.items() if pool["group"] in (node.get("groups") or [])]
        else:
            got = [n for n, node in nodes.items() if _selects(pool["node_selector"], node.get("labels"))]
        members[pool["name"]] = sorted(got)
    out: list[Finding] = []
    owners: dict[str, list[str]] = {}
    for name, got in members.items():
        for node in got:
            owners.setdefault(node, []).append(name)
    out += _in_two_pools(owners, "node", "Narrow the pools' groups or node selectors so that each node is in one pool.")
    for pool in pools:
        if not members[pool["name"]]:
            how = (
                f"inventory group {pool['group']}"
                if pool.get("group") is not None
                else "node selector " + ", ".join(f"{k}={v}" for k, v in sorted(pool["node_selector"].items()))
            )
            out.append(
                _finding(
                    "sharing-pool-empty",
                    "variable",
                    f"{VAR_POOLS}[{pool['name']}]",
                    [f"pool {pool['name']}: {how} matches none of the nodes {', '.join(sorted(nodes)) or '(none)'}"],
                    "A pool that selects no node configures nothing, which is most likely a typo.",
                    "Fix the group or the selector, or remove the pool.",
                )
            )
    return members, out


def _version_tuple(text: Any) -> tuple[int, ...]:
    nums = re.findall(r"\d+", str(text or ""))
    return tuple(int(n) for n in nums[:3])


def dra_findings(
    pools: Sequence[Mapping[str, Any]],
    members: Mapping[str, Sequence[str]],
    kubernetes_version: str,
    served_resource_versions: Sequence[str],
    driver_versions: Mapping[str, str | None],
) -> list[Finding]:
    """DRA pools need Kubernetes >= 1.34 serving resource.k8s.io/v1 and NVIDIA driver >= 580 on their hosts."""
    dra = [p for p in pools if p.get("model") == "dra"]
    if not dra:
        return []
    out: list[Finding] = []
    if _version_tuple(kubernetes_version)[:2] < DRA_MIN_KUBERNETES or "v1" not in served_resource_versions:
        out.append(
            _finding(
                "sharing-dra-kubernetes-too-old",
                "Cluster",
                "kubernetes",
                [
                    f"Kubernetes {kubernetes_version}",
                    "resource.k8s.io versions served: " + (", ".join(served_resource_versions) or "none"),
                ],
                "The DRA driver for NVIDIA GPUs needs resource.k8s.io/v1 (Kubernetes 1.34 and later, where DRA is GA "
                "and on by default).",
                "Upgrade the cluster to Kubernetes 1.34 or later, or use another model for the DRA pools.",
            )
        )
    for pool in dra:
        for node in members.get(pool["name"], ()):
            version = driver_versions.get(node)
            major = _version_tuple(version)[:1]
            if not major or major[0] < DRA_MIN_DRIVER:
                out.append(
                    _finding(
                        "sharing-dra-driver-too-old",
                        "Node",
                        node,
                        [f"pool {pool['name']}: NVIDIA driver {version or 'not found'} on {node}"],
                        f"The DRA driver for NVIDIA GPUs needs NVIDIA driver {DRA_MIN_DRIVER} or later on the host.",
                        f"Install driver {DRA_MIN_DRIVER} or later on {node} (host_prep / gpu_operator driver "
                        "version), or move the node out of the DRA pool.",
                    )
                )
    return out


def device_plugin_configs(pools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """ConfigMap entries (entry name -> k8s-device-plugin config v1): one per time-slicing or MPS pool, and
    ``exclusive`` for every other node (the ClusterPolicy's devicePlugin.config.default)."""
    out: dict[str, dict[str, Any]] = {EXCLUSIVE_ENTRY: {"version": "v1"}}
    for pool in pools:
        model = pool.get("model")
        if model not in ("time_slicing", "mps"):
            continue
        resource: dict[str, Any] = {"name": GPU, "replicas": pool["replicas"]}
        shared: dict[str, Any] = {"resources": [resource]}
        if pool.get("rename_by_default"):
            shared["renameByDefault"] = True
        if "fail_requests_greater_than_one" in pool:
            shared["failRequestsGreaterThanOne"] = pool["fail_requests_greater_than_one"]
        key = "timeSlicing" if model == "time_slicing" else "mps"
        out[pool["name"]] = {"version": "v1", "sharing": {key: shared}}
    return out

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""GPU sharing per node pool (issue 9): the rules and builders as pure functions (no I/O).

A pool is an inventory group or a node label selector plus one model: ``exclusive``, ``time_slicing``, ``mps``,
``mig``, ``dra`` or ``kai_fraction`` (whole GPUs from the device plugin that KAI Scheduler hands out in fractions:
its ``global.gpuSharing``, decided in ``_kai.gpu_sharing``; KAI itself is required by
``_inputs.batch_schedulers``). The functions here are the one place the sharing rules live:

- :func:`pool_input_findings`: bad input before any change (each finding names the variable and the field).
- :func:`pool_members`: which nodes each pool holds; a node in two pools and a pool matching no node are findings.
- :func:`mig_findings`: a pool's ``mig.config`` name must be one mig-manager generates on every GPU model of the
  pool (``_gpu_catalog.mig_config_names``).
- :func:`dra_findings`: Kubernetes >= 1.34 with ``resource.k8s.io/v1`` served, NVIDIA driver >= 580 on the hosts.
- :func:`device_plugin_configs`: the k8s-device-plugin config entries (``version: v1``), one per time-slicing or
  MPS pool, plus ``exclusive`` (the default for every other node).
- :func:`expected_capacity` and :func:`capacity_findings`: the resources each node must advertise, computed the
  way the device plugin replicates devices, against what the nodes advertise.

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

from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_catalog, _inputs

Finding = dict[str, Any]

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
# a label value (the name becomes nvidia.com/mig.config=<name>)
_LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
# mig-parted pkg/types/mig_profile.go: [<C>c.]<G>g.<M>gb[+<attr>[,<attr>]]
_MIG_PROFILE_RE = re.compile(r"^([0-9]+c\.)?[0-9]+g\.[0-9]+gb([+-][a-z][a-z.]*)*\Z")
_MIG_ENTRY_KEYS = ("devices", "mig-enabled", "mig-devices", "device-filter")


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


def _gpu_ids(gpus: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return sorted({(str(g.get("vendor_id", "")).lower(), str(g.get("device_id", "")).lower()) for g in gpus})


def _model_name(ids: tuple[str, str]) -> str:
    entry = _gpu_catalog.gpu(*ids)
    return entry["model"] if entry else f"PCI {ids[0]}:{ids[1]}"


def mig_findings(
    pools: Sequence[Mapping[str, Any]],
    members: Mapping[str, Sequence[str]],
    node_gpus: Mapping[str, Sequence[Mapping[str, Any]]],
    mig_configs: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Each MIG pool's config name must be generated on every GPU model of its nodes (``node_gpus``: node -> the
    accelerators of gpu_host_facts, or of the node's labels). With custom configs (``mig_configs``, the
    ClusterPolicy's migManager.config.name) mig-manager knows only those names (and ``all-disabled``, which the
    role adds), and a custom layout must fit every GPU model and node of the pool."""
    out: list[Finding] = []
    custom = mig_parted_config(mig_configs)["mig-configs"] if mig_configs else None
    for pool in pools:
        if pool.get("model") != "mig":
            continue
        by_model: dict[tuple[str, str], list[str]] = {}
        counts: dict[str, int] = {}
        for node in members.get(pool["name"], ()):
            counts[node] = len(node_gpus.get(node) or [])
            for ids in _gpu_ids(node_gpus.get(node) or []):
                by_model.setdefault(ids, []).append(node)
        if custom is not None:
            if pool["mig_config"] not in custom:
                out.append(
                    _finding(
                        "sharing-mig-config-invalid",
                        "variable",
                        f"{VAR_POOLS}[{pool['name']}].mig_config",
                        [
                            f"mig_config: {pool['mig_config']}",
                            f"{VAR_MIG_CONFIGS}: " + ", ".join(sorted(custom)),
                        ],
                        "With custom MIG configs mig-manager v0.15.0 reads only that ConfigMap and generates no "
                        "names (cmd/nvidia-mig-manager/main.go setupMigConfig): this name would fail on every node.",
                        f"Use a name of {VAR_MIG_CONFIGS}, or add this config there.",
                    )
                )
            elif isinstance(custom[pool["mig_config"]], list):
                out += _custom_fit_findings(pool, custom[pool["mig_config"]], by_model, counts)
            continue
        for ids, nodes in sorted(by_model.items()):
            valid = _gpu_catalog.mig_config_names(*ids)
            if pool["mig_config"] in valid:
                continue
            out.append(
                _finding(
                    "sharing-mig-config-invalid",
                    "variable",
                    f"{VAR_POOLS}[{pool['name']}].mig_config",
                    [
                        f"mig_config: {pool['mig_config']}",
                        f"{_model_name(ids)} on {', '.join(nodes)}",
                        "valid there: " + (", ".join(valid) if valid else "none (this GPU has no MIG)"),
                    ],
                    "mig-manager would mark these nodes mig.config.state=failed: the name is not a MIG layout of "
                    "this GPU (mig-manager v0.15.0 generates the names from the GPU's profiles).",
                    "Pick a name valid on every GPU model of the pool, or split the pool by GPU model.",
                )
            )
    return out


def _node_layouts(
    pool: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], custom: Mapping[str, Any] | None
) -> list[dict[str, int] | None]:
    """Per GPU of a node of MIG pool ``pool``: the MIG devices its config makes (None: MIG disabled)."""
    out: list[dict[str, int] | None] = []
    for i, g in enumerate(gpus):
        ids = (str(g.get("vendor_id", "")).lower(), str(g.get("device_id", "")).lower())
        if custom is not None and isinstance(custom.get(pool["mig_config"]), list):
            out.append(mig_layouts(custom[pool["mig_config"]], ids, len(gpus))[i])
        elif pool["mig_config"] == MIG_DISABLED:
            out.append(None)
        else:
            out.append(_mig_instances(pool["mig_config"], ids))
    return out


def mig_strategy_findings(
    pools: Sequence[Mapping[str, Any]],
    members: Mapping[str, Sequence[str]],
    node_gpus: Mapping[str, Sequence[Mapping[str, Any]]],
    mig_strategy: str,
    mig_configs: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """With the ``single`` MIG strategy the device plugin (k8s-device-plugin v0.20.0 internal/rm/device_map.go)
    refuses a node whose GPUs are not all MIG-enabled or all disabled ('all devices on the node must be configured
    with the same migEnabled value'), a MIG-enabled GPU without MIG devices ('has no MIG devices configured') and
    MIG devices of more than one profile ('more than one MIG device type present on node'): a MIG pool's layout
    must give every GPU of a node devices of one profile (all-<profile>), or disable MIG."""
    if mig_strategy != "single":
        return []
    custom = mig_parted_config(mig_configs)["mig-configs"] if mig_configs else None
    out: list[Finding] = []
    for pool in pools:
        if pool.get("model") != "mig" or (custom is not None and pool["mig_config"] not in custom):
            continue
        for node in members.get(pool["name"], ()):
            gpus = node_gpus.get(node) or []
            if custom is None and any(
                pool["mig_config"] not in _gpu_catalog.mig_config_names(*i) for i in _gpu_ids(gpus)
            ):
                continue  # an unknown name: mig_findings says so
            layouts = _node_layouts(pool, gpus, custom)
            if not layouts or all(layout is None for layout in layouts):
                continue
            problems = []
            if any(layout is None for layout in layouts):
                problems.append("GPUs with MIG enabled and disabled on one node")
            if any(layout is not None and not any(layout.values()) for layout in layouts):
                problems.append("a MIG-enabled GPU without MIG devices")
            profiles = sorted({p for layout in layouts if layout for p, c in layout.items() if c})
            if len(profiles) > 1:
                problems.append("more than one MIG profile: " + ", ".join(profiles))
            if problems:
                out.append(
                    _finding(
                        "sharing-mig-strategy-single-mixed-layout",
                        "variable",
                        f"{VAR_POOLS}[{pool['name']}].mig_config",
                        [f"mig_config: {pool['mig_config']} on {node}", f"{VAR_MIG_STRATEGY}: single", *problems],
                        "With the single MIG strategy the device plugin refuses this layout and advertises nothing "
                        "on the node (k8s-device-plugin v0.20.0 internal/rm/device_map.go: every GPU MIG-enabled "
                        "with devices of one profile, or none).",
                        f"Use a layout of one profile on every GPU (all-<profile>), or set {VAR_MIG_STRATEGY}: mixed.",
                    )
                )
    return out


# --------------------------------------------------------------------------------------------------
# Custom mig-parted configs (gpu_sharing_mig_configs)
# --------------------------------------------------------------------------------------------------
# NVIDIA/mig-parted v0.15.0 api/spec/v1/spec.go: a config is a non-empty list of entries {devices: all | [int],
# mig-enabled: bool (both required), mig-devices: {profile: count} (required when mig-enabled, and no device when
# not), device-filter: "0x<device><vendor>" or a list of them}; any other key is "unexpected field". With a custom
# ConfigMap (ClusterPolicy migManager.config.name) mig-manager v0.15.0 uses that file only and generates nothing
# (cmd/nvidia-mig-manager/main.go setupMigConfig), so a MIG pool's name must then be one of the custom configs.


def _entry_findings(var: str, entry: Any) -> list[Finding]:
    if not isinstance(entry, Mapping):
        return [_bad(var, entry, "A mig-parted config entry is a mapping.", "See docs/sharing.md, Custom MIG configs.")]
    out: list[Finding] = []
    for key in sorted(set(entry) - set(_MIG_ENTRY_KEYS), key=str):
        out.append(
            _bad(
                f"{var}.{key}",
                entry[key],
                f"mig-parted refuses the entry: unexpected field {key} (api/spec/v1/spec.go); the fields are "
                + ", ".join(_MIG_ENTRY_KEYS)
                + ".",
                f"Remove {key} (mig-parted's keys use '-', e.g. mig-devices).",
            )
        )
    devices = entry.get("devices")
    if not (
        devices == "all" or (isinstance(devices, list) and devices and all(_is_int(d) and d >= 0 for d in devices))
    ):
        out.append(
            _bad(
                f"{var}.devices",
                devices,
                "devices is required: all, or a non-empty list of GPU indexes (integers from 0).",
                "Write devices: all or devices: [0, 1].",
            )
        )
    elif isinstance(devices, list) and len(set(devices)) != len(devices):
        out.append(_bad(f"{var}.devices", devices, "A GPU index is listed twice.", "List each index once."))
    enabled = entry.get("mig-enabled")
    if not isinstance(enabled, bool):
        out.append(_bad(f"{var}.mig-enabled", enabled, "mig-enabled is required: true or false.", "Use true or false."))
    mig_devices = entry.get("mig-devices")
    if enabled is False and mig_devices:
        out.append(
            _bad(
                f"{var}.mig-devices",
                mig_devices,
                "mig-parted refuses MIG devices on an entry with mig-enabled: false ('MIG devices included when "
                "'mig-enabled' is false').",
                "Set mig-enabled: true or remove mig-devices.",
            )
        )
    elif enabled is True:
        if not isinstance(mig_devices, Mapping):
            out.append(
                _bad(
                    f"{var}.mig-devices",
                    mig_devices,
                    "An entry with mig-enabled: true needs mig-devices, a mapping of MIG profile to count ({} "
                    "enables MIG with no device, as upstream's all-enabled).",
                    "Write mig-devices: {'1g.10gb': 7}, or use mig-enabled: false.",
                )
            )
        else:
            for profile, count in mig_devices.items():
                if not (isinstance(profile, str) and _MIG_PROFILE_RE.match(profile)):
                    out.append(
                        _bad(
                            f"{var}.mig-devices",
                            profile,
                            "Not a MIG profile name ([<C>c.]<G>g.<M>gb[+attribute], mig-parted pkg/types).",
                            "Use a profile of the GPU, such as 1g.10gb or 3g.40gb.",
                        )
                    )
                if not (_is_int(count) and count >= 1):
                    out.append(
                        _bad(
                            f"{var}.mig-devices.{profile}",
                            count,
                            "A MIG device count is a positive integer.",
                            "Set 1 or more, or remove the profile.",
                        )
                    )
    dfilter = entry.get("device-filter")
    if dfilter is not None:
        items = [dfilter] if isinstance(dfilter, str) else dfilter
        if not isinstance(items, list) or not items or not all(_device_filter_id(f) for f in items):
            out.append(
                _bad(
                    f"{var}.device-filter",
                    dfilter,
                    "device-filter is a PCI device ID written as mig-parted reads it: 0x<device><vendor> "
                    "(0x233010DE for an H100 80GB HBM3), or a list of them.",
                    "Use the GPU's device and vendor IDs, or remove device-filter.",
                )
            )
    return out


def _device_filter_id(text: Any) -> tuple[str, str] | None:
    """(vendor_id, device_id) of a mig-parted device-filter item (pkg/types NewDeviceIDFromString: a packed
    32-bit device<<16|vendor, in any base strconv reads, optionally ':<subsystem>', which is not compared here)."""
    if not isinstance(text, str):
        return None
    head = text.split(":", 1)[0].strip()
    try:
        raw = int(head, 0)
    except ValueError:
        return None
    if not 0 < raw < 1 << 32:
        return None
    return f"{raw & 0xFFFF:04x}", f"{raw >> 16:04x}"


def mig_configs_input_findings(configs: Any) -> list[Finding]:
    """Structural rules of gpu_sharing_mig_configs (name -> list of mig-parted entries), before any change."""
    if configs in (None, {}):
        return []
    if not isinstance(configs, Mapping):
        return [
            _bad(
                VAR_MIG_CONFIGS,
                configs,
                "The custom MIG configs are a mapping of config name to a list of entries.",
                "See docs/sharing.md, Custom MIG configs.",
            )
        ]
    out: list[Finding] = []
    for name, entries in configs.items():
        var = f"{VAR_MIG_CONFIGS}[{name}]"
        if not (isinstance(name, str) and _LABEL_VALUE_RE.match(name) and len(name) <= 63):
            out.append(
                _bad(
                    var,
                    name,
                    "A MIG config name becomes the node label nvidia.com/mig.config=<name>: a label value (at most "
                    "63 letters, digits, '-', '_', '.', starting and ending with a letter or digit).",
                    "Rename the config, e.g. h100-half-1g.",
                )
            )
        if not isinstance(entries, list) or not entries:
            out.append(
                _bad(
                    var,
                    entries,
                    "A config is a non-empty list of entries (mig-parted: 'at least one entry in <name> is required').",
                    "Add an entry such as {devices: all, mig-enabled: true, mig-devices: {'1g.10gb': 7}}.",
                )
            )
            continue
        for i, entry in enumerate(entries):
            out += _entry_findings(f"{var}[{i}]", entry)
    return out


def mig_parted_config(configs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ConfigMap's config.yaml document (mig-parted ``version: v1``): the custom configs, plus ``all-disabled``
    when they lack it (the role sets it on nodes leaving a MIG pool, the GPU Operator on unlabelled MIG nodes)."""
    out: dict[str, Any] = {MIG_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    out.update({str(k): list(v) for k, v in (configs or {}).items()})
    return {"version": "v1", "mig-configs": out}


def mig_layouts(entries: Sequence[Mapping[str, Any]], ids: tuple[str, str], count: int) -> list[dict[str, int] | None]:
    """Per GPU index (0..count-1) of GPUs ``ids``, the MIG devices a custom config makes: profile -> count, {} for
    MIG enabled without devices, None for MIG disabled or for a GPU no entry matches (mig-parted walks the entries
    in order, each applying to the GPUs its device-filter and devices match: a later entry wins)."""
    out: list[dict[str, int] | None] = [None] * count
    for entry in entries:
        dfilter = entry.get("device-filter")
        if dfilter:
            wanted = {_device_filter_id(f) for f in ([dfilter] if isinstance(dfilter, str) else dfilter)}
            if ids not in wanted:
                continue
        devices = entry.get("devices")
        for i in range(count):
            if devices == "all" or (isinstance(devices, list) and i in devices):
                out[i] = dict(entry.get("mig-devices") or {}) if entry.get("mig-enabled") else None
    return out


def _custom_fit_findings(
    pool: Mapping[str, Any], entries: Any, by_model: Mapping[Any, Sequence[str]], counts: Mapping[str, int]
) -> list[Finding]:
    """A custom config on the pool's GPUs: profiles of each GPU model, counts within the profile's maximum and the
    GPU's compute/memory slices, device indexes within each node's GPU count."""
    out: list[Finding] = []
    var = f"{VAR_POOLS}[{pool['name']}].mig_config"
    name = pool["mig_config"]
    for ids, nodes in sorted(by_model.items()):
        profiles = _gpu_catalog.mig_profiles(*ids)
        slices, total = _gpu_catalog.mig_slices(*ids)
        model = _model_name(ids)
        problems: list[str] = []
        if not profiles:
            problems.append(f"{model} has no MIG")
        for i, entry in enumerate(entries):
            dfilter = entry.get("device-filter")
            if dfilter:
                items = [dfilter] if isinstance(dfilter, str) else dfilter
                if ids not in {_device_filter_id(f) for f in items}:
                    continue
            if isinstance(entry.get("devices"), list):
                short = sorted(n for n in nodes if max(entry["devices"]) >= counts.get(n, 0))
                if short:
                    problems.append(
                        f"entry {i}: devices {entry['devices']} but "
                        + ", ".join(f"{n} has {counts.get(n, 0)} GPUs (indexes from 0)" for n in short)
                    )
            if not entry.get("mig-enabled") or not profiles:
                continue
            layout = entry.get("mig-devices") or {}
            unknown = sorted(p for p in layout if p not in profiles)
            if unknown:
                problems.append(
                    f"entry {i}: {', '.join(unknown)} not a MIG profile of {model} (its profiles: "
                    + ", ".join(profiles)
                    + ")"
                )
                continue
            over = [f"{p}: {c} (at most {profiles[p]})" for p, c in sorted(layout.items()) if c > profiles[p]]
            if over:
                problems.append(f"entry {i}: more instances than one {model} holds: " + ", ".join(over))
            compute = sum(slices[p][0] * c for p, c in layout.items())
            memory = sum(slices[p][1] * c for p, c in layout.items())
            if compute > total[0] or memory > total[1]:
                problems.append(
                    f"entry {i}: {compute}/{total[0]} compute and {memory}/{total[1]} memory slices of one {model}"
                )
        if problems:
            out.append(
                _finding(
                    "sharing-mig-custom-config-invalid",
                    "variable",
                    var,
                    [f"mig_config: {name} ({VAR_MIG_CONFIGS})", f"{model} on {', '.join(nodes)}", *problems],
                    "mig-manager would mark these nodes mig.config.state=failed: the custom layout does not fit "
                    "this GPU (profiles and slices: _gpu_catalog.MIG_PROFILES, mig_slices; NVIDIA MIG User Guide).",
                    "Fix the custom config for this GPU model (or give it a device-filter), or split the pool by GPU "
                    "model.",
                )
            )
    return out


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


def _mig_instances(config: str, ids: tuple[str, str]) -> dict[str, int]:
    """MIG devices per GPU that mig.config ``config`` makes: profile -> count (empty: MIG disabled or unknown)."""
    if config == "all-balanced":
        return _gpu_catalog.mig_balanced(*ids)
    for profile, count in _gpu_catalog.mig_profiles(*ids).items():
        if config == "all-" + profile.replace("+", "."):
            return {profile: count}
    return {}


def _mig_resource(profile: str, mig_strategy: str) -> str:
    return GPU if mig_strategy == "single" else "nvidia.com/mig-" + profile.replace("+", ".")


def expected_capacity(
    pool: Mapping[str, Any],
    gpus: Sequence[Mapping[str, Any]],
    mig_strategy: str = "single",
    mig_configs: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """The extended resources one node of ``pool`` advertises with these GPUs (resource -> count), as the device
    plugin computes them. A DRA pool advertises no device-plugin resource (its GPUs are ResourceSlice devices).
    With custom MIG configs the pool's layout is the custom one, per GPU index; a GPU with MIG disabled counts
    whole."""
    n = len(gpus)
    model = pool.get("model")
    if model == "dra" or n == 0:
        return {}
    if model in ("time_slicing", "mps"):
        name = GPU + ".shared" if pool.get("rename_by_default") else GPU
        return {name: n * pool["replicas"]}
    custom = mig_parted_config(mig_configs)["mig-configs"] if mig_configs else {}
    if model == "mig" and isinstance(custom.get(pool.get("mig_config")), list):
        out_custom: dict[str, int] = {}
        for i, g in enumerate(gpus):
            ids = (str(g.get("vendor_id", "")).lower(), str(g.get("device_id", "")).lower())
            layout = mig_layouts(custom[pool["mig_config"]], ids, n)[i]
            for profile, count in (layout if layout is not None else {GPU: 1}).items():
                name = GPU if layout is None else _mig_resource(profile, mig_strategy)
                out_custom[name] = out_custom.get(name, 0) + count
        return out_custom
    if model == "mig" and pool.get("mig_config") not in ("all-disabled", None):
        out: dict[str, int] = {}
        for ids in [(str(g.get("vendor_id", "")).lower(), str(g.get("device_id", "")).lower()) for g in gpus]:
            for profile, count in _mig_instances(pool["mig_config"], ids).items():
                name = _mig_resource(profile, mig_strategy)
                out[name] = out.get(name, 0) + count
        return out
    return {GPU: n}


def is_gpu_resource(name: str) -> bool:
    """A device-plugin GPU resource: whole or replicated GPUs (nvidia.com/gpu, nvidia.com/gpu.shared) or MIG devices
    (nvidia.com/mig-<profile>)."""
    return name == GPU or name.startswith(GPU + ".") or name.startswith("nvidia.com/mig-")


def capacity_findings(
    expected: Mapping[str, Mapping[str, int]], advertised: Mapping[str, Mapping[str, Any]], pool_of: Mapping[str, str]
) -> list[Finding]:
    """Each node's advertised (allocatable) GPU resources against the expected ones; resources under nvidia.com/
    that the node advertises and the pool does not expect count too (a stale replica or MIG resource)."""
    out: list[Finding] = []
    for node, want in sorted(expected.items()):
        have = {k: int(str(v)) for k, v in (advertised.get(node) or {}).items() if k.startswith("nvidia.com/")}
        names = sorted(set(want) | {k for k, v in have.items() if v and is_gpu_resource(k)})
        wrong = [
            f"{r}: expected {want.get(r, 0)}, advertised {have.get(r, 0)}"
            for r in names
            if want.get(r, 0) != have.get(r, 0)
        ]
        if wrong:
            out.append(
                _finding(
                    "sharing-capacity-mismatch",
                    "Node",
                    node,
                    [f"pool {pool_of.get(node, '-')}", *wrong],
                    "The node does not advertise what its pool's sharing model gives: the device plugin has not "
                    "loaded the pool's config (not restarted, or its config label points elsewhere) or MIG is not "
                    "applied yet.",
                    f"Check the node's {CONFIG_LABEL} and {MIG_CONFIG_LABEL}/{MIG_STATE_LABEL} labels and the "
                    "device-plugin pod's log on the node; restart the pod after a config change.",
                )
            )
    return out

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""MIG rules of the sharing pools: each MIG pool's config name on every GPU model of its nodes, the single
strategy's layouts, and the custom mig-parted configs (``gpu_sharing_mig_configs``). Pure functions, no I/O."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.host import _gpu_catalog
from ansible_collections.gpuops.platform.plugins.module_utils.sharing._pools import (
    GPU,
    MIG_DISABLED,
    VAR_MIG_CONFIGS,
    VAR_MIG_STRATEGY,
    VAR_POOLS,
    Finding,
    _bad,
    _finding,
    _is_int,
)

# a label value (the name becomes nvidia.com/mig.config=<name>)
_LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
# mig-parted pkg/types/mig_profile.go: [<C>c.]<G>g.<M>gb[+<attr>[,<attr>]]
_MIG_PROFILE_RE = re.compile(r"^([0-9]+c\.)?[0-9]+g\.[0-9]+gb([+-][a-z][a-z.]*)*\Z")
_MIG_ENTRY_KEYS = ("devices", "mig-enabled", "mig-devices", "device-filter")


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

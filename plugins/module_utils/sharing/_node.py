# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The sharing model a node RUNS, read from the cluster alone (no pool variables): the readiness table's SHARING
column (``gpu_cluster_status`` with ``sharing: true``, ``playbooks/diagnose.yml``).

Precedence follows what allocates the GPUs: ResourceSlices of the NVIDIA DRA driver on the node (DRA); a MIG
configuration other than ``all-disabled`` (MIG); the device-plugin config entry the node's
``nvidia.com/device-plugin.config`` label names, or the ClusterPolicy's ``devicePlugin.config.default``, read from the
ConfigMap the ClusterPolicy names (time-slicing, MPS, or exclusive for an entry without sharing); else exclusive."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _capacity, _pools

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    yaml = None

DRA_DRIVER = "gpu.nvidia.com"
_SHARING_KEYS = (("timeSlicing", "time_slicing"), ("mps", "mps"))


_PARSE_ERRORS: tuple[type[Exception], ...] = (ValueError,) + ((yaml.YAMLError,) if yaml is not None else ())


def entry_model(text: Any) -> tuple[str, list[int]]:
    """A device-plugin config entry (v1, YAML or JSON text) -> (model, replicas of its shared resources).
    An entry that does not parse is ``invalid`` (the device plugin fails on it as well)."""
    try:
        config = (yaml.safe_load(text) if yaml is not None else json.loads(text)) if isinstance(text, str) else text
    except _PARSE_ERRORS:
        return "invalid", []
    if not isinstance(config, Mapping):
        return "invalid", []
    sharing = config.get("sharing")
    for key, model in _SHARING_KEYS:
        block = sharing.get(key) if isinstance(sharing, Mapping) else None
        resources = block.get("resources") if isinstance(block, Mapping) else None
        if resources and isinstance(resources, list):
            try:
                return model, sorted({int(r.get("replicas", 1)) for r in resources if isinstance(r, Mapping)})
            except (TypeError, ValueError):
                return "invalid", []
    return "exclusive", []


def policy_config(cluster_policies: Sequence[Mapping[str, Any]] | None) -> tuple[str | None, str | None]:
    """(ConfigMap name, default entry) of the ClusterPolicy the operator reconciles: the oldest (creation time, then
    name); the others are ``ignored`` upstream."""
    policies = sorted(
        cluster_policies or (),
        key=lambda p: (
            str((p.get("metadata") or {}).get("creationTimestamp") or ""),
            str((p.get("metadata") or {}).get("name") or ""),
        ),
    )
    if not policies:
        return None, None
    config = ((policies[0].get("spec") or {}).get("devicePlugin") or {}).get("config") or {}
    return config.get("name") or None, config.get("default") or None


def slice_devices(slices: Sequence[Mapping[str, Any]] | None) -> dict[str, int]:
    """Node -> devices the NVIDIA DRA driver's ResourceSlices publish on it."""
    out: dict[str, int] = {}
    for s in slices or ():
        spec = s.get("spec") or {}
        if spec.get("driver") == DRA_DRIVER and spec.get("nodeName"):
            out[spec["nodeName"]] = out.get(spec["nodeName"], 0) + len(spec.get("devices") or ())
    return out


def node_sharing(
    labels: Mapping[str, str],
    allocatable: Mapping[str, Any],
    configs: Mapping[str, Any] | None,
    default_entry: str | None,
    dra_devices: int | None,
) -> dict[str, Any]:
    """What the node runs: ``model`` (exclusive, time_slicing, mps, mig, dra, kai_fraction - an exclusive node with
    the KAI fraction label - or unknown when the entry it names is
    missing or invalid), ``detail`` (entry and replicas, MIG config and state, DRA devices), ``advertised`` (the
    GPU resources of its allocatable) and ``summary`` (the readiness table's cell). ``configs`` is None when no
    device-plugin ConfigMap is named or read."""
    advertised = {
        k: v for k, v in sorted(allocatable.items()) if _capacity.is_gpu_resource(k) or k.startswith("amd.com/")
    }
    mig = labels.get(_pools.MIG_CONFIG_LABEL)
    entry = labels.get(_pools.CONFIG_LABEL) or default_entry
    if dra_devices:
        model, detail = "dra", f"{dra_devices} device(s) in ResourceSlices"
    elif mig and mig != "all-disabled":
        model, detail = "mig", f"{mig} ({labels.get(_pools.MIG_STATE_LABEL) or 'no state'})"
    elif entry and configs is not None:
        if entry not in configs:
            model, detail = "unknown", f"config entry {entry} missing"
        else:
            model, replicas = entry_model(configs[entry])
            detail = entry + (" x" + "/".join(str(r) for r in replicas) if replicas else "")
            if model == "invalid":
                model, detail = "unknown", f"config entry {entry} invalid"
    else:
        model, detail = "exclusive", ""
    if model == "exclusive" and labels.get(_pools.KAI_FRACTION_LABEL) == "true":
        model, detail = "kai_fraction", (detail + " " if detail else "") + "(KAI Scheduler shares whole GPUs)"
    res = ",".join(f"{k}={v}" for k, v in advertised.items()) or "nothing advertised"
    return {
        "model": model,
        "detail": detail,
        "advertised": advertised,
        "summary": f"{model}{' ' + detail if detail else ''}: {res}",
    }

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The capacity a pool's node advertises, computed as the device plugin computes it, and the findings of a node
that advertises something else. Pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sharing._mig import (
    _mig_instances,
    _mig_resource,
    mig_layouts,
    mig_parted_config,
)
from ansible_collections.gpuops.platform.plugins.module_utils.sharing._pools import (
    CONFIG_LABEL,
    GPU,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    Finding,
    _finding,
)


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

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Diagnosis rules about AMD GPU nodes and the AMD GPU Operator's DeviceConfig."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_common import (
    describe,
    finding,
    node_finding,
    pod_finding,
    pods_by_role,
)


def amd_resource_missing(view: Mapping[str, Any], node: Mapping[str, Any], evidence: list[str]) -> dict[str, Any]:
    name, ns = node["name"], view["amd_namespace"]
    plugin = pods_by_role(view, name, "amd").get("device-plugin")
    if plugin is None:
        dcs = view["device_configs"]
        sels = [f"{d['name']}: {d['selector']}" for d in dcs["objects"]]
        return node_finding(
            name,
            fid="gpu-resource-missing",
            severity="error",
            evidence=[
                *evidence,
                f"no *-device-plugin pod in namespace {ns} on the node",
                *(f"DeviceConfig {s}" for s in sels),
            ],
            cause="AMD device-plugin pod missing on the node: "
            + (
                "no DeviceConfig exists (the AMD GPU Operator deploys nothing without one)"
                if not dcs["objects"]
                else "the node does not match a DeviceConfig selector (NFD label feature.node.kubernetes.io/amd-gpu "
                "missing)"
            ),
            fix="create a DeviceConfig whose spec.selector matches the node, and check that NFD labels it "
            "feature.node.kubernetes.io/amd-gpu=true (the chart's NodeFeatureRule)",
        )
    if not plugin["ready"]:
        return pod_finding(
            plugin,
            fid="gpu-resource-missing",
            severity="error",
            evidence=[*evidence, describe(plugin)],
            cause="AMD device-plugin pod not ready on the node",
            fix=f"kubectl logs -n {ns} {plugin['name']} --all-containers",
        )
    return node_finding(
        name,
        fid="gpu-resource-missing",
        severity="error",
        evidence=[*evidence, describe(plugin)],
        cause="the AMD device plugin runs but advertises no GPU: the amdgpu driver is not loaded",
        fix="load amdgpu on the host (or enable the DeviceConfig driver) and check /dev/kfd exists",
    )


def rule_device_config(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """AMD DeviceConfig status: no node matches its selector, device plugin not everywhere, driver failures."""
    out = []
    amd_nodes = [n for n in view["nodes"] if n["vendor"] == "amd"]
    for dc in view["device_configs"]["objects"]:
        obj = {"kind": "DeviceConfig", "namespace": dc["namespace"], "name": dc["name"]}
        dp = dc["device_plugin"]
        if amd_nodes and not dp.get("nodesMatchingSelectorNumber"):
            out.append(
                finding(
                    fid="deviceconfig-no-nodes",
                    severity="warning",
                    obj=obj,
                    node=None,
                    evidence=[f"selector {dc['selector']}", "status.devicePlugin.nodesMatchingSelectorNumber 0"],
                    cause="no node matches the DeviceConfig selector: the NFD label "
                    "feature.node.kubernetes.io/amd-gpu is missing (NodeFeatureRule not installed or NFD not running)",
                    fix="install NFD and the AMD chart's NodeFeatureRule, or fix spec.selector",
                )
            )
        elif dp.get("desiredNumber", 0) > dp.get("availableNumber", 0):
            out.append(
                finding(
                    fid="deviceconfig-not-ready",
                    severity="warning",
                    obj=obj,
                    node=None,
                    evidence=[f"device plugin available {dp.get('availableNumber', 0)} of {dp.get('desiredNumber')}"],
                    cause="the AMD device plugin is not available on every selected node",
                    fix="see the per-node findings and the device plugin pods",
                )
            )
        for node, mod in sorted(dc["node_module_status"].items()):
            status = (mod or {}).get("status") or ""
            if status.endswith("Failed") or status.endswith("Timed-Out"):
                out.append(
                    finding(
                        fid="amd-driver-install-failed",
                        severity="error",
                        obj=obj,
                        node=node,
                        evidence=[f"nodeModuleStatus[{node}].status {status}, kernel {mod.get('kernelVersion')}"],
                        cause="the amdgpu driver module could not be installed on the node",
                        fix="check the KMM module loader pod on the node and the driver version for this kernel",
                    )
                )
    return out

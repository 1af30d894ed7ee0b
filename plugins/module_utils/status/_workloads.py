# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""GPU workloads: the pods that hold or wait for GPUs, outside the operators' own namespaces. What
``playbooks/uninstall.yml`` refuses to pull the GPU stack from under (``gpu_cluster_status`` ``workloads: true``)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _capacity
from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import AMD_GPU

_DONE = ("Succeeded", "Failed")


def gpu_resources(pod: Mapping[str, Any]) -> list[str]:
    """The GPU resources the pod's containers request or limit (NVIDIA whole, shared or MIG; AMD), sorted; a pod
    with DRA resource claims adds ``resourceClaims``."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    names = {r for c in containers for f in ("limits", "requests") for r in ((c.get("resources") or {}).get(f) or {})}
    out = sorted(r for r in names if _capacity.is_gpu_resource(r) or r == AMD_GPU or r.startswith(AMD_GPU + "-"))
    if spec.get("resourceClaims"):
        out.append("resourceClaims")
    return out


def gpu_workloads(pods: Iterable[Mapping[str, Any]], skip_namespaces: Collection[str] = ()) -> list[dict[str, Any]]:
    """Pods not finished that use GPUs (``gpu_resources``), outside ``skip_namespaces`` (the operators' namespaces,
    whose validator pods request a GPU): namespace, name, node (None while pending), phase and resources, sorted."""
    out = []
    for pod in pods or ():
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if meta.get("namespace") in skip_namespaces or status.get("phase") in _DONE:
            continue
        resources = gpu_resources(pod)
        if resources:
            out.append(
                {
                    "namespace": meta.get("namespace"),
                    "name": meta.get("name"),
                    "node": (pod.get("spec") or {}).get("nodeName"),
                    "phase": status.get("phase"),
                    "resources": resources,
                }
            )
    return sorted(out, key=lambda w: (w["namespace"] or "", w["name"] or ""))

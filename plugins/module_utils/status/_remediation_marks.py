# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The marks a remediation quarantine leaves on a Node - its label, its annotations, gpuops' taint, the GPU in words -
once, with no import of the rest of the collection: the quarantine (``_policy``), the node's diagnosis
(``status._diag_scheduling``) and the smoke tests that re-validate a quarantined node (``smoke._smoke_plan``) read
them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BY = "gpuops"
LABEL = "gpuops.platform/remediation"  # quarantined | notified | break-fix
PREFIX = "gpuops.platform/remediation."
ANNOTATIONS = {
    "alert": PREFIX + "alert",
    "fault_class": PREFIX + "fault-class",
    "severity": PREFIX + "severity",
    "gpu_uuid": PREFIX + "gpu-uuid",
    "gpu_pci_bus_id": PREFIX + "gpu-pci-bus-id",
    "gpu_index": PREFIX + "gpu-index",
    "fault_since": PREFIX + "fault-since",
    "fingerprint": PREFIX + "fingerprint",
    "by": PREFIX + "by",
    "at": PREFIX + "at",
    "cordoned": PREFIX + "cordoned",  # "true": gpuops cordoned the node (a node a person cordoned stays cordoned)
    "taint": PREFIX + "taint",  # the taint gpuops added, key=value:effect
    "break_fix": PREFIX + "break-fix",
}


def taint_text(taint: Mapping[str, Any]) -> str:
    return f"{taint['key']}={taint.get('value') or ''}:{taint['effect']}"


def quarantine_taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The node's taints that gpuops' quarantine added (its annotation names them), as the node has them."""
    ours = ((node.get("metadata") or {}).get("annotations") or {}).get(ANNOTATIONS["taint"])
    taints = (node.get("spec") or {}).get("taints") or []
    return [dict(t) for t in taints if ours and isinstance(t, Mapping) and t.get("key") and taint_text(t) == ours]


def gpu_words(gpu: Mapping[str, Any]) -> str:
    """The GPU in words for messages: ``GPU 3 (GPU-5c6f..., 00000000:17:00.0)``; ``the node`` when unknown."""
    parts = [x for x in (gpu.get("uuid"), gpu.get("pci_bus_id")) if x]
    if gpu.get("index") is None and not parts:
        return "the node (no GPU named)"
    head = f"GPU {gpu['index']}" if gpu.get("index") is not None else "GPU"
    return head + (f" ({', '.join(parts)})" if parts else "")

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Host rules' common ground: the finding (``{id, severity, object, evidence, cause, fix}`` plus its ``concern`` and
the host_prep fix that addresses it), the default intent, and what the rules read from the ``gpuops_host`` facts
(the NVIDIA GPUs, the host's and the effective driver). Pure functions (no I/O); the rules are in ``_host_rules``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Facts = dict[str, Any]
Intent = dict[str, Any]
Finding = dict[str, Any]

SEVERITIES = ("error", "warning", "info")
CONCERNS = ("headers", "nouveau", "driver", "mofed", "fabricmanager", "acs", "gpudirect", "sriov", "secure_boot")
FIXES = ("nouveau", "acs", "sriov", "fabricmanager")
HOST_MOFED = ("mlnx_ofed", "doca_ofed")
DEPLOY_DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"

DEFAULT_INTENT: Intent = {
    "node": None,
    "stage": "preflight",  # or "validate": the state the role asked for must hold now
    "nvidia_driver": "none",  # none | host | container
    "exclude_host_driver_nodes": False,
    "driver_build": False,
    "ofed": "none",  # none | host | operator
    "rdma": False,
    "use_host_mofed": False,
    "gpudirect": False,
    "unsigned_modules": False,
    "nouveau": None,  # None (not managed) | present | absent
    "acs": None,  # None (not managed) | {"state": "disabled"|"enabled", "devices": [addresses]}
    "sriov": [],  # [{pf, num_vfs}]
    "fabricmanager": False,  # host_prep's plan installs nvidia-fabricmanager (its fabricmanager fix runs)
    "reboot_pending": False,
}


def finding(
    fid: str,
    severity: str,
    obj: dict[str, str],
    evidence: Iterable[str | None],
    cause: str,
    fix: str,
    fixed_by: str | None = None,
) -> Finding:
    return {
        "id": fid,
        "severity": severity,
        "object": obj,
        "evidence": [e for e in evidence if e],
        "cause": cause,
        "fix": fix,
        "fixed_by": fixed_by,
    }


def ref(kind: str, name: str | None) -> dict[str, str]:
    return {"kind": kind, "name": name or "host"}


def _get(facts: Facts, *keys: str) -> Any:
    node: Any = facts
    for k in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(k)
    return node


def _words(mapping: dict[str, Any] | None) -> str:
    """``{'intel_iommu': 'on', 'iommu': 'pt'}`` -> ``intel_iommu=on iommu=pt``; empty -> ``(none)``."""
    return " ".join(f"{k}={v}" for k, v in (mapping or {}).items()) or "(none)"


def _gpu_name(dev: dict[str, Any]) -> str:
    return "{} ({})".format(
        dev.get("address"), dev.get("model") or "PCI {}:{}".format(dev.get("vendor_id"), dev.get("device_id"))
    )


def nvidia_gpus(facts: Facts) -> list[dict[str, Any]]:
    return [d for d in facts.get("accelerators") or [] if d.get("vendor_id") == "10de"]


def host_driver(facts: Facts) -> str | None:
    """The host's NVIDIA driver version (loaded, else installed for the running kernel), or None."""
    drv = facts.get("nvidia_driver") or {}
    if drv.get("loaded"):
        return drv.get("version") or drv.get("installed_version") or "unknown"
    return drv.get("installed_version")


def effective_driver(facts: Facts, intent: Intent) -> str:
    """Which driver the node's GPUs use: a node with a host driver that the driver container skips (labelled
    nvidia.com/gpu.deploy.driver=false) uses the host's."""
    planned = intent["nvidia_driver"]
    if planned == "container" and intent["exclude_host_driver_nodes"] and host_driver(facts):
        return "host"
    return planned

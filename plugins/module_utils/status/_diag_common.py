# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""What every diagnosis file shares: the finding shape (built with keyword arguments), object references,
the lookups into the view (operand pods by role, host facts) and the host-driver evidence."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import (
    DRIVER,
    NFD,
    NVIDIA_NFD_LABELS,
    ROLES,
)

SEVERITIES = ("error", "warning", "info")


HOST_FACTS_FIX = (
    "run gpuops.platform.gpu_host_facts on the node's host and pass its gpuops_host facts as host_facts "
    "to narrow the cause"
)


def finding(
    *, fid: str, severity: str, obj: Mapping[str, Any] | None, node: str | None, evidence: Any, cause: str, fix: str
) -> dict[str, Any]:
    return {
        "id": fid,
        "severity": severity,
        "object": obj,
        "node": node,
        "evidence": [e for e in evidence if e],
        "cause": cause,
        "fix": fix,
    }


def node_finding(name: str, *, fid: str, severity: str, evidence: Any, cause: str, fix: str) -> dict[str, Any]:
    """A finding about a node."""
    return finding(fid=fid, severity=severity, obj=node_ref(name), node=name, evidence=evidence, cause=cause, fix=fix)


def pod_finding(
    pod: Mapping[str, Any], *, fid: str, severity: str, evidence: Any, cause: str, fix: str
) -> dict[str, Any]:
    """A finding about a pod, on the node it runs on (or is bound to)."""
    return finding(
        fid=fid, severity=severity, obj=pod_ref(pod), node=pod["node"], evidence=evidence, cause=cause, fix=fix
    )


def pod_ref(pod: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": "Pod", "namespace": pod["namespace"], "name": pod["name"]}


def node_ref(name: str) -> dict[str, Any]:
    return {"kind": "Node", "namespace": None, "name": name}


def role(pod: Mapping[str, Any]) -> str:
    comp = pod.get("component") or ""
    if pod.get("vendor") == "amd":
        if comp.endswith("-device-plugin"):
            return "device-plugin"
        return comp
    if comp.startswith(DRIVER) or comp.startswith("nvidia-gpu-driver"):
        return "driver"
    return ROLES.get(comp, comp)


def pods_by_role(view: Mapping[str, Any], node: str, vendor: str | None = None) -> dict[str, dict[str, Any]]:
    """role -> the (first) operand pod of that role on ``node``."""
    out: dict[str, dict[str, Any]] = {}
    for pod in view["pods_by_node"].get(node, ()):
        if vendor is None or pod["vendor"] == vendor:
            out.setdefault(role(pod), pod)
    return out


def describe(pod: Mapping[str, Any]) -> str:
    bits = [f"pod {pod['namespace']}/{pod['name']} is {pod['state']}"]
    if pod.get("container"):
        bits.append(f"(container {pod['container']})")
    if pod.get("restarts"):
        bits.append(f"restarts {pod['restarts']}")
    text = " ".join(bits)
    if pod.get("message"):
        text += f": {pod['message']}"
    return text


def facts_of(view: Mapping[str, Any], node: str) -> dict[str, Any] | None:
    return view["host_facts"].get(node)


def dig(facts: Any, *path: str) -> Any:
    cur = facts
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def node_of(view: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return view["node_index"].get(name)


def kernel_of(view: Mapping[str, Any], name: str) -> str | None:
    node = node_of(view, name)
    return view["node_labels"].get(name, {}).get(f"{NFD}/kernel-version.full") or (node or {}).get("kernel")


HOST_DRIVER_MESSAGES = ("already loaded", "driver is in use", "could not unload nvidia driver")


def _driver_says_host_driver(view: Mapping[str, Any], name: str) -> bool:
    driver = pods_by_role(view, name, "nvidia").get("driver")
    message = str((driver or {}).get("message") or "").lower()
    return any(m in message for m in HOST_DRIVER_MESSAGES)


def host_driver_loaded(view: Mapping[str, Any], name: str) -> bool:
    """True when the host has its own NVIDIA driver: host facts, the operator's pre-installed label, or the
    driver container's last message (it cannot unload/load over a host driver)."""
    if dig(facts_of(view, name), "nvidia_driver", "loaded"):
        return True
    if view["node_labels"].get(name, {}).get("nvidia.com/gpu.deploy.driver") == "pre-installed":
        return True
    return _driver_says_host_driver(view, name)


def host_driver_evidence(view: Mapping[str, Any], name: str) -> str:
    facts = facts_of(view, name)
    if dig(facts, "nvidia_driver", "loaded"):
        version = dig(facts, "nvidia_driver", "version")
        return f"host facts: nvidia driver {version} loaded on the host" if version else "host facts: nvidia loaded"
    if view["node_labels"].get(name, {}).get("nvidia.com/gpu.deploy.driver") == "pre-installed":
        return "node label nvidia.com/gpu.deploy.driver=pre-installed"
    return "the driver container reports a driver already loaded on the host"


def node_problems(node: Mapping[str, Any]) -> list[str]:
    """The node's condition evidence when it is not healthy: Ready not True, or another condition True
    (MemoryPressure, DiskPressure, node-problem-detector conditions...)."""
    out = []
    if not node["ready"]:
        out.append(f"node condition Ready={node['ready_reason']}: {node['ready_message']}")
    out += [f"node condition {c['type']}=True ({c.get('reason')}): {c.get('message')}" for c in node["problems"]]
    return out


DISABLE_DRIVER_FIX = (
    "use one driver: keep the host driver and disable the driver container (Helm driver.enabled=false, "
    "ClusterPolicy spec.driver.enabled=false), or remove the host driver packages and reboot"
)


def fmt_labels(labels: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


DEPLOY = "nvidia.com/gpu.deploy."  # the GPU Operator's per-operand node labels


def _nfd_missing(labels: Mapping[str, Any], missing: Iterable[str]) -> bool:
    return any(k.startswith(NFD) for k in missing) or not any(labels.get(k) == "true" for k in NVIDIA_NFD_LABELS)


def _deploy_off(labels: Mapping[str, Any], missing: Iterable[str]) -> dict[str, Any]:
    """The operator's deploy labels the node has, with a value other than the DaemonSet wants (false, paused-*)."""
    return {k: labels[k] for k in sorted(missing) if k.startswith(DEPLOY) and k in labels}


def why_labels_missing(labels: Mapping[str, Any], missing: Mapping[str, Any]) -> str:
    if _nfd_missing(labels, missing):
        return (
            "; NFD labels are missing on the node (no feature.node.kubernetes.io/pci-10de.present=true), so the "
            "operator does not mark it as a GPU node"
        )
    off = _deploy_off(labels, missing)
    if off:
        return (
            f"; the node's label {fmt_labels(off)} keeps the operand off it (the operator deploys it only where true)"
        )
    if any(k.startswith(DEPLOY) for k in missing):
        return (
            "; the node has the NFD PCI label but the operator has not set nvidia.com/gpu.deploy.* on it "
            "(ClusterPolicy not reconciled, or the labels were set to false/paused)"
        )
    return ""


def nfd_fix(node: str) -> str:
    return (
        f"check that an nfd-worker pod runs on {node} (its tolerations must match the node's taints) and that the "
        "NFD PCI whitelist includes classes 0300/0302; the operator labels the node once "
        "feature.node.kubernetes.io/pci-10de.present=true is there"
    )


def labels_fix(node: str, labels: Mapping[str, Any], missing: Mapping[str, Any]) -> str:
    """The fix for a DaemonSet pod missing on ``node`` because the node lacks ``missing`` (label -> wanted value):
    NFD's when its labels are missing, the operator's deploy label when it is set to another value, the operator's
    reconcile when it has not set it."""
    if _nfd_missing(labels, missing):
        return nfd_fix(node)
    off = _deploy_off(labels, missing)
    if off:
        return (
            "; ".join(f"kubectl label node {node} {k}={missing[k]} --overwrite" for k in off)
            + f" (if the node should run the operand: {fmt_labels(off)} was set on it by hand or by a tool that keeps "
            "operands off nodes)"
        )
    if any(k.startswith(DEPLOY) for k in missing):
        return (
            "check the gpu-operator pod's log and the ClusterPolicy's status: the operator sets "
            f"{DEPLOY}* on every node with NFD's PCI label once it reconciles"
        )
    return (
        f"label the node ({fmt_labels(missing)}) if it should run the operand, or change the DaemonSet's nodeSelector"
    )

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Diagnosis rules about NVIDIA GPU nodes: resources missing, the driver container crash-looping, the
validator stuck in an init step (with the NVSwitch fabric manager check) and a host driver beside the
driver container."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.host import _fabricmanager_rules
from ansible_collections.gpuops.platform.plugins.module_utils.status._diag_common import (
    DISABLE_DRIVER_FIX,
    HOST_FACTS_FIX,
    describe,
    dig,
    facts_of,
    finding,
    fmt_labels,
    host_driver_evidence,
    host_driver_loaded,
    kernel_of,
    labels_fix,
    node_finding,
    node_problems,
    node_ref,
    pod_finding,
    pod_ref,
    pods_by_role,
    role,
    why_labels_missing,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._gpu_labels import DEVICE_PLUGIN, VALIDATION_STEPS


def nvidia_resource_missing(
    view: Mapping[str, Any], node: Mapping[str, Any], labels: Mapping[str, Any], evidence: list[str]
) -> dict[str, Any]:
    name, ns = node["name"], view["operator_namespace"]
    if labels.get("nvidia.com/gpu.deploy.operands") == "false":
        return node_finding(
            name,
            fid="gpu-resource-missing",
            severity="info",
            evidence=[*evidence, "node label nvidia.com/gpu.deploy.operands=false"],
            cause="the GPU Operator's operands are disabled on this node by the label "
            "nvidia.com/gpu.deploy.operands=false",
            fix=f"kubectl label node {name} nvidia.com/gpu.deploy.operands- (if the node should serve GPUs)",
        )
    if (
        labels.get("nvidia.com/gpu.deploy.device-plugin") == "false"
        and labels.get("gpuops.platform/sharing-dra") == "true"
    ):
        return node_finding(
            name,
            fid="gpu-resource-missing",
            severity="info",
            evidence=[
                *evidence,
                "node labels nvidia.com/gpu.deploy.device-plugin=false, gpuops.platform/sharing-dra=true",
            ],
            cause="the device plugin is disabled on this node (a DRA pool of the gpu_sharing role: its GPUs are "
            "ResourceSlice devices)",
            fix=f"kubectl label node {name} nvidia.com/gpu.deploy.device-plugin- (if the node should advertise "
            "nvidia.com/gpu)",
        )
    mig_state = labels.get("nvidia.com/mig.config.state")
    if mig_state in ("pending", "rebooting"):
        return node_finding(
            name,
            fid="gpu-resource-missing",
            severity="warning",
            evidence=[*evidence, f"node label nvidia.com/mig.config.state={mig_state}"],
            cause="MIG reconfiguration in progress: mig-manager paused the device plugin (paused-for-mig-change)",
            fix="wait for nvidia.com/mig.config.state=success; if it stays, read the nvidia-mig-manager pod's log",
        )
    if mig_state == "failed":
        return node_finding(
            name,
            fid="gpu-resource-missing",
            severity="error",
            evidence=[
                *evidence,
                f"node label nvidia.com/mig.config.state=failed, mig.config={labels.get('nvidia.com/mig.config')}",
            ],
            cause="MIG reconfiguration failed, so the device plugin stays paused",
            fix="set nvidia.com/mig.config to a configuration valid for this GPU model (or all-disabled); read the "
            "nvidia-mig-manager pod's log for the failing step",
        )
    ops = pods_by_role(view, name, "nvidia")
    driver, plugin = ops.get("driver"), ops.get("device-plugin")
    facts = facts_of(view, name)
    if driver is not None and not driver["ready"]:
        return pod_finding(
            driver,
            fid="gpu-resource-missing",
            severity="error",
            evidence=[*evidence, describe(driver)],
            cause="NVIDIA driver not loaded: the driver container is not ready on this node, so the device plugin has "
            "nothing to advertise"
            + (" (it conflicts with a driver on the host)" if host_driver_loaded(view, name) else ""),
            fix="fix the driver pod first (see its driver-crashloop or validator finding; "
            f"kubectl logs -n {ns} {driver['name']} -c nvidia-driver-ctr)",
        )
    if driver is None and facts is not None and not dig(facts, "nvidia_driver", "loaded"):
        return node_finding(
            name,
            fid="gpu-resource-missing",
            severity="error",
            evidence=[
                *evidence,
                "no driver container pod on the node",
                "host facts: nvidia driver not loaded on the host",
            ],
            cause="NVIDIA driver not loaded: neither a driver container nor a host driver is present",
            fix="enable the driver container (Helm driver.enabled=true) or install the host driver and load it",
        )
    if plugin is None:
        ds = view["daemonsets"].get(DEVICE_PLUGIN)
        cps = view["cluster_policies"]
        if ds is None and not cps["objects"]:
            return node_finding(
                name,
                fid="gpu-resource-missing",
                severity="error",
                evidence=[
                    *evidence,
                    f"DaemonSet {ns}/{DEVICE_PLUGIN} does not exist",
                    "no ClusterPolicy"
                    + ("" if cps["installed"] else " (CRD clusterpolicies.nvidia.com not installed)"),
                ],
                cause="device-plugin DaemonSet pod missing on the node: the NVIDIA GPU Operator is not "
                + ("configured (no ClusterPolicy)" if cps["installed"] else "installed"),
                fix="install the GPU Operator with its ClusterPolicy (Helm clusterPolicy.deployCR=true), or deploy the "
                "NVIDIA device plugin",
            )
        if ds is None:
            return finding(
                fid="gpu-resource-missing",
                severity="error",
                obj={"kind": "DaemonSet", "namespace": ns, "name": DEVICE_PLUGIN},
                node=name,
                evidence=[*evidence, f"DaemonSet {ns}/{DEVICE_PLUGIN} does not exist"],
                cause="device-plugin DaemonSet pod missing on the node: the DaemonSet is not deployed (devicePlugin "
                "disabled in the ClusterPolicy, or the operator has not reconciled)",
                fix="enable devicePlugin in the ClusterPolicy and check the gpu-operator pod and ClusterPolicy status",
            )
        labels = view["node_labels"].get(name, {})
        missing = {k: v for k, v in ds["node_selector"].items() if labels.get(k) != v}
        cause = "device-plugin DaemonSet pod missing on the node"
        if missing:
            cause += f": the node lacks the labels the DaemonSet selects on ({fmt_labels(missing)})"
            cause += why_labels_missing(labels, missing)
        return finding(
            fid="gpu-resource-missing",
            severity="error",
            obj={"kind": "DaemonSet", "namespace": ns, "name": DEVICE_PLUGIN},
            node=name,
            evidence=[
                *evidence,
                f"no pod of DaemonSet {ns}/{DEVICE_PLUGIN} on the node",
                f"nodeSelector {ds['node_selector']}",
            ],
            cause=cause,
            fix=labels_fix(name, labels, missing)
            if missing
            else "check the DaemonSet's tolerations against the node's taints",
        )
    if not plugin["ready"]:
        waits_for = VALIDATION_STEPS.get(plugin.get("init_step") or "")
        blocker = ops.get(waits_for) if waits_for else None
        if blocker is not None and not blocker["ready"]:
            return pod_finding(
                blocker,
                fid="gpu-resource-missing",
                severity="error",
                evidence=[*evidence, describe(plugin), describe(blocker)],
                cause=f"the device plugin waits in init container {plugin['init_step']} for the {waits_for}, which is "
                f"not ready on the node ({blocker['name']} is {blocker['state']})",
                fix=f"fix {blocker['name']} first (see its finding); the device plugin then starts",
            )
        step = f"; it waits in init container {plugin['init_step']}" if plugin.get("init_step") else ""
        return pod_finding(
            plugin,
            fid="gpu-resource-missing",
            severity="error",
            evidence=[*evidence, describe(plugin)],
            cause=f"device-plugin pod not ready on the node{step}",
            fix=f"kubectl logs -n {ns} {plugin['name']} --all-containers; fix the component it waits for",
        )
    loaded = dig(facts, "nvidia_driver", "loaded")
    return node_finding(
        name,
        fid="gpu-resource-missing",
        severity="error",
        evidence=[*evidence, describe(plugin), "host facts: nvidia driver not loaded" if loaded is False else None],
        cause="the device plugin runs but advertises no GPU: the driver is not loaded"
        + ("" if loaded is False else " or the GPUs are unhealthy (Xid errors)"),
        fix=f"load the driver on {name} (nvidia-smi must list the GPUs); read the device plugin log for NVML/Xid "
        "errors",
    )


def rule_driver_crashloop(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Driver pod in CrashLoopBackOff -> nouveau loaded, or kernel/driver mismatch (refined by host facts)."""
    out = []
    for pod in view["operand_pods"]:
        if role(pod) != "driver" or pod["vendor"] != "nvidia" or pod["state"] != "CrashLoopBackOff":
            continue
        name = pod["node"]
        if host_driver_loaded(view, name):
            continue  # host-driver-conflict / node-not-ready name that cause
        facts = facts_of(view, name)
        kernel = dig(facts, "kernel", "release") or kernel_of(view, name)
        evidence = [describe(pod), f"node kernel {kernel}" if kernel else None]
        logs = f"kubectl logs -n {pod['namespace']} {pod['name']} -c nvidia-driver-ctr --previous"
        if facts is None:
            cause = (
                f"kernel/driver mismatch (the driver cannot be built or loaded for kernel {kernel or 'unknown'}) or "
                "nouveau loaded on the host"
            )
            fix = f"{logs}; {HOST_FACTS_FIX}"
        elif dig(facts, "nouveau", "loaded"):
            in_use = " and in use" if dig(facts, "nouveau", "in_use") else ""
            evidence.append(f"host facts: nouveau loaded{in_use}")
            cause = "nouveau is loaded on the host and holds the GPUs, so nvidia.ko cannot load"
            fix = (
                "blacklist nouveau (gpuops.platform.nouveau_blacklist, or the host_prep role), rebuild the initramfs "
                "and reboot the node"
            )
        elif dig(facts, "kernel", "headers_installed") is False:
            evidence.append(f"host facts: no kernel headers for {kernel}")
            cause = (
                f"kernel/driver mismatch: no kernel headers for the running kernel {kernel}, the driver cannot build"
            )
            fix = f"install linux-headers-{kernel} on the host, or use a precompiled driver image for this kernel"
        elif dig(facts, "secure_boot", "state") == "enabled":
            evidence.append("host facts: Secure Boot enabled")
            cause = "Secure Boot is enabled and the driver container's unsigned kernel module is rejected"
            fix = "disable Secure Boot, or use signed precompiled driver modules"
        else:
            cause = f"kernel/driver mismatch: the driver version does not build or load on kernel {kernel}"
            fix = f"{logs}; choose a driver version that supports kernel {kernel} (or a precompiled image for it)"
        out.append(pod_finding(pod, fid="driver-crashloop", severity="error", evidence=evidence, cause=cause, fix=fix))
    return out


def rule_validator_init(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Validator stuck in Init -> the first failing step's component (driver, toolkit, fabricmanager on NVSwitch
    systems for CUDA, device plugin), not the validator."""
    out = []
    for pod in view["operand_pods"]:
        if role(pod) != "validator" or pod["phase"] != "Pending" or not pod.get("init_step"):
            continue
        name, step = pod["node"], pod["init_step"]
        ops = pods_by_role(view, name, "nvidia")
        evidence = [f"validator pod {pod['namespace']}/{pod['name']} waits in init container {step}: {pod['message']}"]
        component = VALIDATION_STEPS.get(step)
        if component == "cuda":
            out.append(_cuda_validation(view, pod, evidence))
            continue
        target = ops.get(component) if component else None
        if target is not None:
            evidence.append(describe(target))
        if target is not None and target["ready"]:
            out.append(_step_stuck_component_ready(pod, step, target, evidence))
            continue
        if component == "driver":
            if target is not None:
                obj, cause = pod_ref(target), f"the driver is not ready on the node (driver pod is {target['state']})"
                fix = f"fix the driver pod {target['name']} (see its own finding and log); the validator then proceeds"
            elif host_driver_loaded(view, name):
                obj, cause = node_ref(name), "the host driver does not answer (nvidia-smi fails on the host)"
                fix = f"run nvidia-smi on {name} and fix the host driver"
            else:
                obj, cause = node_ref(name), "no driver on the node: no driver container pod and no host driver"
                fix = "enable the driver container (driver.enabled=true) or install the host driver"
        elif component == "toolkit":
            obj = pod_ref(target) if target else node_ref(name)
            state = f"toolkit pod is {target['state']}" if target else "no toolkit pod on the node"
            cause = f"the NVIDIA Container Toolkit is not ready on the node ({state})"
            fix = "fix the nvidia-container-toolkit pod (runtime config path/socket for this container runtime)"
        elif component == "device-plugin":
            obj = pod_ref(target) if target else node_ref(name)
            state = f"device-plugin pod is {target['state']}" if target else "no device-plugin pod on the node"
            cause = f"the device plugin does not advertise GPUs on the node ({state})"
            fix = "fix the nvidia-device-plugin pod on the node; check allocatable nvidia.com/gpu"
        else:
            obj, cause = pod_ref(pod), f"validation step {step} does not complete"
            fix = f"kubectl logs -n {pod['namespace']} {pod['name']} -c {step}"
        out.append(
            finding(
                fid="validator-init-stuck",
                severity="error",
                obj=obj,
                node=name,
                evidence=evidence,
                cause=cause,
                fix=fix,
            )
        )
    return out


STEP_HINTS = {
    "driver-validation": (
        "the validator cannot run nvidia-smi from the driver install directory (ClusterPolicy hostPaths "
        "driverInstallDir/rootFS do not match where the driver container installs)",
        "compare hostPaths.driverInstallDir and hostPaths.rootFS with the driver container's install path",
    ),
    "toolkit-validation": (
        "a container cannot start with the NVIDIA runtime (the runtime is not the default or the RuntimeClass "
        "nvidia is missing)",
        "check the container runtime config written by the toolkit and the RuntimeClass nvidia",
    ),
    "plugin-validation": (
        "the plugin validation workload gets no GPU (nvidia.com/gpu not allocatable, or all GPUs in use)",
        "check allocatable nvidia.com/gpu on the node and the device plugin log",
    ),
}


def _step_stuck_component_ready(
    pod: Mapping[str, Any], step: str, target: Mapping[str, Any], evidence: list[str]
) -> dict[str, Any]:
    cause, fix = STEP_HINTS.get(step, (f"validation step {step} does not complete", "read its log"))
    return pod_finding(
        pod,
        fid="validator-init-stuck",
        severity="error",
        evidence=evidence,
        cause=f"{step} does not complete although {target['name']} is ready: {cause}",
        fix=f"kubectl logs -n {pod['namespace']} {pod['name']} -c {step}; {fix}",
    )


FM_FIX = (
    "start nvidia-fabricmanager with the driver's exact version (gpuops.platform.fabricmanager), then the CUDA "
    "validation passes"
)


def fabricmanager_problem(facts: Any) -> tuple[list[str], str] | None:
    """The diagnosis' view of the fabricmanager/driver lockstep rule, which lives once in
    ``_fabricmanager_rules.fabricmanager_lockstep``: (evidence, cause) when the NVSwitch fabric cannot be trained, else
    None."""
    problem = _fabricmanager_rules.fabricmanager_lockstep(facts) if facts is not None else None
    if problem is None:
        return None
    evidence = [f"host facts: {e}" for e in problem["evidence"]]
    if problem["id"] == "fabricmanager-version-mismatch":
        return evidence, "nvidia-fabricmanager's version differs from the driver's, so the fabric is not initialised"
    if problem["id"] in ("fabricmanager-missing", "fabricmanager-inactive"):
        return (
            evidence,
            "nvidia-fabricmanager is not running on this NVSwitch system, so CUDA cannot initialise the GPUs",
        )
    return evidence, problem["cause"]


def _cuda_validation(view: Mapping[str, Any], pod: Mapping[str, Any], evidence: list[str]) -> dict[str, Any]:
    name = pod["node"]
    facts = facts_of(view, name)
    fm = fabricmanager_problem(facts)
    switches = dig(facts, "nvswitches")
    if fm is not None:
        more, cause = fm
        evidence.extend(more)
        fix = FM_FIX
    elif switches:
        evidence.append(f"host facts: {len(switches)} NVSwitch(es), fabricmanager running at the driver's version")
        cause = "the CUDA workload validation fails although driver, toolkit and fabric manager are up"
        fix = f"kubectl logs -n {pod['namespace']} -l app=nvidia-cuda-validator; check the GPUs with nvidia-smi"
    elif facts is None:
        cause = (
            "the CUDA workload validation fails; on NVSwitch systems (HGX/DGX) the usual cause is "
            "nvidia-fabricmanager not running with the driver's version"
        )
        fix = f"{HOST_FACTS_FIX}; {FM_FIX}"
    else:
        cause = "the CUDA workload validation fails although driver and toolkit validated"
        fix = (
            f"kubectl logs -n {pod['namespace']} -l app=nvidia-cuda-validator; "
            "check the GPUs with nvidia-smi on the host"
        )
    return node_finding(name, fid="validator-init-stuck", severity="error", evidence=evidence, cause=cause, fix=fix)


def rule_host_driver_conflict(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Host driver and driver container both present -> the cause of the node's NotReady (or its other failing
    condition); a driver pod beside a host driver on a healthy node is still reported."""
    out = []
    for node in view["nodes"]:
        name = node["name"]
        driver = pods_by_role(view, name, "nvidia").get("driver")
        if driver is None or not host_driver_loaded(view, name):
            continue
        evidence = [host_driver_evidence(view, name), describe(driver)]
        problems = node_problems(node)
        if problems:
            out.append(
                node_finding(
                    name,
                    fid="node-not-ready",
                    severity="error",
                    evidence=evidence + problems,
                    cause="host driver and driver container both present: the driver container's unload/load of the "
                    "NVIDIA modules conflicts with the host driver and takes the node down",
                    fix=DISABLE_DRIVER_FIX,
                )
            )
            continue
        out.append(
            pod_finding(
                driver,
                fid="host-driver-conflict",
                severity="warning" if driver["ready"] else "error",
                evidence=evidence,
                cause="host driver and driver container both present on the node",
                fix=DISABLE_DRIVER_FIX,
            )
        )
    return out

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Diagnosis of a GPU cluster view (built by ``_cluster_status.build_view``): a table of rules, each a pure
function view -> findings. A finding names the object, the evidence, the documented root cause and the fix:
``{id, severity (error|warning|info), object {kind, namespace, name}, node, evidence [..], cause, fix}``."""

from __future__ import annotations

SEVERITIES = ("error", "warning", "info")

NFD = "feature.node.kubernetes.io"
NVIDIA_NFD_LABELS = (f"{NFD}/pci-10de.present", f"{NFD}/pci-0302_10de.present", f"{NFD}/pci-0300_10de.present")
DRIVER = "nvidia-driver-daemonset"
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
ROLES = {
    "nvidia-container-toolkit-daemonset": "toolkit",
    DEVICE_PLUGIN: "device-plugin",
    "gpu-feature-discovery": "gfd",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-dcgm": "dcgm",
    "nvidia-mig-manager": "mig-manager",
    "nvidia-operator-validator": "validator",
}
# Validator init containers, in order, and the operand each one waits for.
VALIDATION_STEPS = {
    "driver-validation": "driver",
    "toolkit-validation": "toolkit",
    "cuda-validation": "cuda",
    "plugin-validation": "device-plugin",
}
HOST_FACTS_FIX = (
    "run gpuops.platform.gpu_host_facts on the node's host and pass its gpuops_host facts as host_facts "
    "to narrow the cause"
)


# -- helpers ------------------------------------------------------------------------------------------------
def finding(fid, severity, obj, node, evidence, cause, fix):
    return {
        "id": fid,
        "severity": severity,
        "object": obj,
        "node": node,
        "evidence": [e for e in evidence if e],
        "cause": cause,
        "fix": fix,
    }


def pod_ref(pod):
    return {"kind": "Pod", "namespace": pod["namespace"], "name": pod["name"]}


def node_ref(name):
    return {"kind": "Node", "namespace": None, "name": name}


def role(pod):
    comp = pod.get("component") or ""
    if pod.get("vendor") == "amd":
        if comp.endswith("-device-plugin"):
            return "device-plugin"
        return comp
    if comp.startswith(DRIVER) or comp.startswith("nvidia-gpu-driver"):
        return "driver"
    return ROLES.get(comp, comp)


def pods_by_role(view, node, vendor=None):
    """role -> the (first) operand pod of that role on ``node``."""
    out = {}
    for pod in view["pods_by_node"].get(node, ()):
        if vendor is None or pod["vendor"] == vendor:
            out.setdefault(role(pod), pod)
    return out


def describe(pod):
    bits = [f"pod {pod['namespace']}/{pod['name']} is {pod['state']}"]
    if pod.get("container"):
        bits.append(f"(container {pod['container']})")
    if pod.get("restarts"):
        bits.append(f"restarts {pod['restarts']}")
    text = " ".join(bits)
    if pod.get("message"):
        text += f": {pod['message']}"
    return text


def facts_of(view, node):
    return view["host_facts"].get(node)


def _get(facts, *path):
    cur = facts
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def _node(view, name):
    return view["node_index"].get(name)


def _kernel(view, name):
    node = _node(view, name)
    return view["node_labels"].get(name, {}).get(f"{NFD}/kernel-version.full") or (node or {}).get("kernel")


HOST_DRIVER_MESSAGES = ("already loaded", "driver is in use", "could not unload nvidia driver")


def _driver_says_host_driver(view, name):
    driver = pods_by_role(view, name, "nvidia").get("driver")
    message = str((driver or {}).get("message") or "").lower()
    return any(m in message for m in HOST_DRIVER_MESSAGES)


def host_driver_loaded(view, name):
    """True when the host has its own NVIDIA driver: host facts, the operator's pre-installed label, or the
    driver container's last message (it cannot unload/load over a host driver)."""
    if _get(facts_of(view, name), "nvidia_driver", "loaded"):
        return True
    if view["node_labels"].get(name, {}).get("nvidia.com/gpu.deploy.driver") == "pre-installed":
        return True
    return _driver_says_host_driver(view, name)


def _host_driver_evidence(view, name):
    facts = facts_of(view, name)
    if _get(facts, "nvidia_driver", "loaded"):
        version = _get(facts, "nvidia_driver", "version")
        return f"host facts: nvidia driver {version} loaded on the host" if version else "host facts: nvidia loaded"
    if view["node_labels"].get(name, {}).get("nvidia.com/gpu.deploy.driver") == "pre-installed":
        return "node label nvidia.com/gpu.deploy.driver=pre-installed"
    return "the driver container reports a driver already loaded on the host"


def _node_problems(node):
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


# -- rules --------------------------------------------------------------------------------------------------
def rule_gpu_resource_missing(view):
    """GPU node without allocatable GPUs -> device-plugin pod missing/not ready on it, or driver not loaded."""
    out = []
    for node in view["nodes"]:
        name, vendor = node["name"], node["vendor"]
        if vendor not in ("nvidia", "amd") or not node["ready"]:
            continue  # a NotReady node is reported by node-not-ready
        alloc = node["allocatable"]
        if node["gpus"] > 0 or (isinstance(alloc.get("nvidia.com/gpu.shared"), int) and alloc["nvidia.com/gpu.shared"]):
            continue
        resource = "nvidia.com/gpu" if vendor == "nvidia" else "amd.com/gpu"
        labels = view["node_labels"].get(name, {})
        evidence = [f"node {name}: allocatable {resource} is {alloc.get(resource, 'absent')}"]
        if vendor == "nvidia":
            out.append(_nvidia_resource_missing(view, node, labels, evidence))
        else:
            out.append(_amd_resource_missing(view, node, evidence))
    return out


def _nvidia_resource_missing(view, node, labels, evidence):
    name, ns = node["name"], view["operator_namespace"]
    if labels.get("nvidia.com/gpu.deploy.operands") == "false":
        return finding(
            "gpu-resource-missing",
            "info",
            node_ref(name),
            name,
            [*evidence, "node label nvidia.com/gpu.deploy.operands=false"],
            "the GPU Operator's operands are disabled on this node by the label nvidia.com/gpu.deploy.operands=false",
            f"kubectl label node {name} nvidia.com/gpu.deploy.operands- (if the node should serve GPUs)",
        )
    mig_state = labels.get("nvidia.com/mig.config.state")
    if mig_state in ("pending", "rebooting"):
        return finding(
            "gpu-resource-missing",
            "warning",
            node_ref(name),
            name,
            [*evidence, f"node label nvidia.com/mig.config.state={mig_state}"],
            "MIG reconfiguration in progress: mig-manager paused the device plugin (paused-for-mig-change)",
            "wait for nvidia.com/mig.config.state=success; if it stays, read the nvidia-mig-manager pod's log",
        )
    if mig_state == "failed":
        return finding(
            "gpu-resource-missing",
            "error",
            node_ref(name),
            name,
            [
                *evidence,
                f"node label nvidia.com/mig.config.state=failed, mig.config={labels.get('nvidia.com/mig.config')}",
            ],
            "MIG reconfiguration failed, so the device plugin stays paused",
            "set nvidia.com/mig.config to a configuration valid for this GPU model (or all-disabled); read the "
            "nvidia-mig-manager pod's log for the failing step",
        )
    ops = pods_by_role(view, name, "nvidia")
    driver, plugin = ops.get("driver"), ops.get("device-plugin")
    facts = facts_of(view, name)
    if driver is not None and not driver["ready"]:
        return finding(
            "gpu-resource-missing",
            "error",
            pod_ref(driver),
            name,
            [*evidence, describe(driver)],
            "NVIDIA driver not loaded: the driver container is not ready on this node, so the device plugin has "
            "nothing to advertise"
            + (" (it conflicts with a driver on the host)" if host_driver_loaded(view, name) else ""),
            "fix the driver pod first (see its driver-crashloop or validator finding; "
            f"kubectl logs -n {ns} {driver['name']} -c nvidia-driver-ctr)",
        )
    if driver is None and facts is not None and not _get(facts, "nvidia_driver", "loaded"):
        return finding(
            "gpu-resource-missing",
            "error",
            node_ref(name),
            name,
            [*evidence, "no driver container pod on the node", "host facts: nvidia driver not loaded on the host"],
            "NVIDIA driver not loaded: neither a driver container nor a host driver is present",
            "enable the driver container (Helm driver.enabled=true) or install the host driver and load it",
        )
    if plugin is None:
        ds = view["daemonsets"].get(DEVICE_PLUGIN)
        cps = view["cluster_policies"]
        if ds is None and not cps["objects"]:
            return finding(
                "gpu-resource-missing",
                "error",
                node_ref(name),
                name,
                [
                    *evidence,
                    f"DaemonSet {ns}/{DEVICE_PLUGIN} does not exist",
                    "no ClusterPolicy"
                    + ("" if cps["installed"] else " (CRD clusterpolicies.nvidia.com not installed)"),
                ],
                "device-plugin DaemonSet pod missing on the node: the NVIDIA GPU Operator is not "
                + ("configured (no ClusterPolicy)" if cps["installed"] else "installed"),
                "install the GPU Operator with its ClusterPolicy (Helm clusterPolicy.deployCR=true), or deploy the "
                "NVIDIA device plugin",
            )
        if ds is None:
            return finding(
                "gpu-resource-missing",
                "error",
                {"kind": "DaemonSet", "namespace": ns, "name": DEVICE_PLUGIN},
                name,
                [*evidence, f"DaemonSet {ns}/{DEVICE_PLUGIN} does not exist"],
                "device-plugin DaemonSet pod missing on the node: the DaemonSet is not deployed (devicePlugin "
                "disabled in the ClusterPolicy, or the operator has not reconciled)",
                "enable devicePlugin in the ClusterPolicy and check the gpu-operator pod and ClusterPolicy status",
            )
        labels = view["node_labels"].get(name, {})
        missing = {k: v for k, v in ds["node_selector"].items() if labels.get(k) != v}
        cause = "device-plugin DaemonSet pod missing on the node"
        if missing:
            cause += f": the node lacks the labels the DaemonSet selects on ({_fmt_labels(missing)})"
            cause += _why_labels_missing(labels, missing)
        return finding(
            "gpu-resource-missing",
            "error",
            {"kind": "DaemonSet", "namespace": ns, "name": DEVICE_PLUGIN},
            name,
            [*evidence, f"no pod of DaemonSet {ns}/{DEVICE_PLUGIN} on the node", f"nodeSelector {ds['node_selector']}"],
            cause,
            _nfd_fix(name) if missing else "check the DaemonSet's tolerations against the node's taints",
        )
    if not plugin["ready"]:
        waits_for = VALIDATION_STEPS.get(plugin.get("init_step") or "")
        blocker = ops.get(waits_for) if waits_for else None
        if blocker is not None and not blocker["ready"]:
            return finding(
                "gpu-resource-missing",
                "error",
                pod_ref(blocker),
                name,
                [*evidence, describe(plugin), describe(blocker)],
                f"the device plugin waits in init container {plugin['init_step']} for the {waits_for}, which is "
                f"not ready on the node ({blocker['name']} is {blocker['state']})",
                f"fix {blocker['name']} first (see its finding); the device plugin then starts",
            )
        step = f"; it waits in init container {plugin['init_step']}" if plugin.get("init_step") else ""
        return finding(
            "gpu-resource-missing",
            "error",
            pod_ref(plugin),
            name,
            [*evidence, describe(plugin)],
            f"device-plugin pod not ready on the node{step}",
            f"kubectl logs -n {ns} {plugin['name']} --all-containers; fix the component it waits for",
        )
    loaded = _get(facts, "nvidia_driver", "loaded")
    return finding(
        "gpu-resource-missing",
        "error",
        node_ref(name),
        name,
        [*evidence, describe(plugin), "host facts: nvidia driver not loaded" if loaded is False else None],
        "the device plugin runs but advertises no GPU: the driver is not loaded"
        + ("" if loaded is False else " or the GPUs are unhealthy (Xid errors)"),
        f"load the driver on {name} (nvidia-smi must list the GPUs); read the device plugin log for NVML/Xid errors",
    )


def _amd_resource_missing(view, node, evidence):
    name, ns = node["name"], view["amd_namespace"]
    plugin = pods_by_role(view, name, "amd").get("device-plugin")
    if plugin is None:
        dcs = view["device_configs"]
        sels = [f"{d['name']}: {d['selector']}" for d in dcs["objects"]]
        return finding(
            "gpu-resource-missing",
            "error",
            node_ref(name),
            name,
            [*evidence, f"no *-device-plugin pod in namespace {ns} on the node", *(f"DeviceConfig {s}" for s in sels)],
            "AMD device-plugin pod missing on the node: "
            + (
                "no DeviceConfig exists (the AMD GPU Operator deploys nothing without one)"
                if not dcs["objects"]
                else "the node does not match a DeviceConfig selector (NFD label feature.node.kubernetes.io/amd-gpu "
                "missing)"
            ),
            "create a DeviceConfig whose spec.selector matches the node, and check that NFD labels it "
            "feature.node.kubernetes.io/amd-gpu=true (the chart's NodeFeatureRule)",
        )
    if not plugin["ready"]:
        return finding(
            "gpu-resource-missing",
            "error",
            pod_ref(plugin),
            name,
            [*evidence, describe(plugin)],
            "AMD device-plugin pod not ready on the node",
            f"kubectl logs -n {ns} {plugin['name']} --all-containers",
        )
    return finding(
        "gpu-resource-missing",
        "error",
        node_ref(name),
        name,
        [*evidence, describe(plugin)],
        "the AMD device plugin runs but advertises no GPU: the amdgpu driver is not loaded",
        "load amdgpu on the host (or enable the DeviceConfig driver) and check /dev/kfd exists",
    )


def _fmt_labels(labels):
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _why_labels_missing(labels, missing):
    has_nfd = any(labels.get(k) == "true" for k in NVIDIA_NFD_LABELS)
    if any(k.startswith(NFD) for k in missing) or not has_nfd:
        return (
            "; NFD labels are missing on the node (no feature.node.kubernetes.io/pci-10de.present=true), so the "
            "operator does not mark it as a GPU node"
        )
    if any(k.startswith("nvidia.com/gpu.deploy.") for k in missing):
        return (
            "; the node has the NFD PCI label but the operator has not set nvidia.com/gpu.deploy.* on it "
            "(ClusterPolicy not reconciled, or the labels were set to false/paused)"
        )
    return ""


def _nfd_fix(node):
    return (
        f"check that an nfd-worker pod runs on {node} (its tolerations must match the node's taints) and that the "
        "NFD PCI whitelist includes classes 0300/0302; the operator labels the node once "
        "feature.node.kubernetes.io/pci-10de.present=true is there"
    )


def rule_driver_crashloop(view):
    """Driver pod in CrashLoopBackOff -> nouveau loaded, or kernel/driver mismatch (refined by host facts)."""
    out = []
    for pod in view["operand_pods"]:
        if role(pod) != "driver" or pod["vendor"] != "nvidia" or pod["state"] != "CrashLoopBackOff":
            continue
        name = pod["node"]
        if host_driver_loaded(view, name):
            continue  # host-driver-conflict / node-not-ready name that cause
        facts = facts_of(view, name)
        kernel = _get(facts, "kernel", "release") or _kernel(view, name)
        evidence = [describe(pod), f"node kernel {kernel}" if kernel else None]
        logs = f"kubectl logs -n {pod['namespace']} {pod['name']} -c nvidia-driver-ctr --previous"
        if facts is None:
            cause = (
                f"kernel/driver mismatch (the driver cannot be built or loaded for kernel {kernel or 'unknown'}) or "
                "nouveau loaded on the host"
            )
            fix = f"{logs}; {HOST_FACTS_FIX}"
        elif _get(facts, "nouveau", "loaded"):
            in_use = " and in use" if _get(facts, "nouveau", "in_use") else ""
            evidence.append(f"host facts: nouveau loaded{in_use}")
            cause = "nouveau is loaded on the host and holds the GPUs, so nvidia.ko cannot load"
            fix = (
                "blacklist nouveau (gpuops.platform.nouveau_blacklist, or the host_prep role), rebuild the initramfs "
                "and reboot the node"
            )
        elif _get(facts, "kernel", "headers_installed") is False:
            evidence.append(f"host facts: no kernel headers for {kernel}")
            cause = (
                f"kernel/driver mismatch: no kernel headers for the running kernel {kernel}, the driver cannot build"
            )
            fix = f"install linux-headers-{kernel} on the host, or use a precompiled driver image for this kernel"
        elif _get(facts, "secure_boot", "state") == "enabled":
            evidence.append("host facts: Secure Boot enabled")
            cause = "Secure Boot is enabled and the driver container's unsigned kernel module is rejected"
            fix = "disable Secure Boot, or use signed precompiled driver modules"
        else:
            cause = f"kernel/driver mismatch: the driver version does not build or load on kernel {kernel}"
            fix = f"{logs}; choose a driver version that supports kernel {kernel} (or a precompiled image for it)"
        out.append(finding("driver-crashloop", "error", pod_ref(pod), name, evidence, cause, fix))
    return out


def rule_validator_init(view):
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
        out.append(finding("validator-init-stuck", "error", obj, name, evidence, cause, fix))
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


def _step_stuck_component_ready(pod, step, target, evidence):
    cause, fix = STEP_HINTS.get(step, (f"validation step {step} does not complete", "read its log"))
    return finding(
        "validator-init-stuck",
        "error",
        pod_ref(pod),
        pod["node"],
        evidence,
        f"{step} does not complete although {target['name']} is ready: {cause}",
        f"kubectl logs -n {pod['namespace']} {pod['name']} -c {step}; {fix}",
    )


def _cuda_validation(view, pod, evidence):
    name = pod["node"]
    facts = facts_of(view, name)
    switches = _get(facts, "nvswitches")
    fm_fix = (
        "start nvidia-fabricmanager with the driver's exact version (gpuops.platform.fabricmanager), then the CUDA "
        "validation passes"
    )
    if facts is not None and switches:
        fm_active = _get(facts, "fabricmanager", "active")
        fm_ver, drv_ver = _get(facts, "fabricmanager", "version"), _get(facts, "nvidia_driver", "version")
        evidence.append(f"host facts: {len(switches)} NVSwitch(es), fabricmanager active={fm_active}")
        if not fm_active:
            cause = "nvidia-fabricmanager is not running on this NVSwitch system, so CUDA cannot initialise the GPUs"
            return finding("validator-init-stuck", "error", node_ref(name), name, evidence, cause, fm_fix)
        if fm_ver and drv_ver and fm_ver != drv_ver:
            evidence.append(f"fabricmanager {fm_ver} vs driver {drv_ver}")
            cause = "nvidia-fabricmanager's version differs from the driver's, so the fabric is not initialised"
            return finding("validator-init-stuck", "error", node_ref(name), name, evidence, cause, fm_fix)
    if facts is None:
        cause = (
            "the CUDA workload validation fails; on NVSwitch systems (HGX/DGX) the usual cause is "
            "nvidia-fabricmanager not running with the driver's version"
        )
        fix = f"{HOST_FACTS_FIX}; {fm_fix}"
    else:
        cause = "the CUDA workload validation fails although driver and toolkit validated"
        fix = (
            f"kubectl logs -n {pod['namespace']} -l app=nvidia-cuda-validator; "
            "check the GPUs with nvidia-smi on the host"
        )
    return finding("validator-init-stuck", "error", node_ref(name), name, evidence, cause, fix)


def rule_operand_pending(view):
    """Operand DaemonSet pod Pending on a node -> the node lacks the labels the DaemonSet wants (NFD labels)."""
    out = []
    for pod in view["operand_pods"]:
        if pod["phase"] != "Pending" or pod["scheduled"] or not pod["node"]:
            continue
        name = pod["node"]
        labels = view["node_labels"].get(name)
        evidence = [describe(pod)]
        if labels is None:
            out.append(
                finding(
                    "operand-pending",
                    "warning",
                    pod_ref(pod),
                    name,
                    evidence,
                    f"the pod is bound to node {name}, which does not exist any more",
                    f"kubectl delete pod -n {pod['namespace']} {pod['name']} (the DaemonSet controller cleans up)",
                )
            )
            continue
        ds = view["daemonsets"].get(pod["component"]) or {}
        selector = pod["node_selector"] or ds.get("node_selector") or {}
        missing = {k: v for k, v in selector.items() if labels.get(k) != v}
        if missing:
            evidence.append(f"node {name} lacks {_fmt_labels(missing)}")
            cause = f"NFD labels missing on node {name}: it lacks the labels the DaemonSet selects on"
            cause += _why_labels_missing(labels, missing)
            out.append(finding("operand-pending-labels", "error", pod_ref(pod), name, evidence, cause, _nfd_fix(name)))
        else:
            out.append(
                finding(
                    "operand-pending",
                    "warning",
                    pod_ref(pod),
                    name,
                    evidence,
                    "the scheduler cannot place the pod on its node (taints, resources or host ports)",
                    "read the pod's PodScheduled message; add the missing toleration or free the resources",
                )
            )
    return out


def rule_operator_crashloop(view):
    """Operator pod in CrashLoopBackOff -> invalid values/ClusterPolicy or unsupported Kubernetes version."""
    out = []
    versions = ", ".join(view.get("kubelet_versions") or ()) or "unknown"
    for pod in view["operator_pods"]:
        if pod["state"] != "CrashLoopBackOff":
            continue
        out.append(
            finding(
                "operator-crashloop",
                "error",
                pod_ref(pod),
                pod["node"],
                [describe(pod), f"kubelet versions in the cluster: {versions}"],
                "the operator exits at startup: invalid Helm values / ClusterPolicy spec, or a Kubernetes version "
                "the operator release does not support",
                f"kubectl logs -n {pod['namespace']} {pod['name']} --previous; check the values against the chart "
                "(helm get values) and the operator's supported Kubernetes versions",
            )
        )
    return out


def _operator_namespace_elsewhere(view):
    """The namespace the operator reports in the active ClusterPolicy's status.namespace when it is not the
    operator_namespace looked at, else None."""
    active = next((c for c in view["cluster_policies"]["objects"] if c["active"]), None)
    reported = (active or {}).get("namespace")
    return reported if reported and reported != view["operator_namespace"] else None


def rule_operator_namespace(view):
    """The operator reports another namespace than operator_namespace -> operands were looked up in vain."""
    reported = _operator_namespace_elsewhere(view)
    if reported is None:
        return []
    active = next(c for c in view["cluster_policies"]["objects"] if c["active"])
    return [
        finding(
            "operator-namespace-mismatch",
            "warning",
            {"kind": "ClusterPolicy", "namespace": None, "name": active["name"]},
            None,
            [
                f"ClusterPolicy {active['name']} status.namespace {reported}",
                f"operator_namespace {view['operator_namespace']}",
            ],
            f"the operator runs in namespace {reported}, so its pods and operands were looked for in the wrong one",
            f"set operator_namespace: {reported}",
        )
    ]


def rule_operator_missing(view):
    """ClusterPolicy present but no operator pod running -> nothing reconciles it."""
    cps = view["cluster_policies"]
    if not cps["objects"] or any(p["ready"] for p in view["operator_pods"]):
        return []
    if _operator_namespace_elsewhere(view):
        return []  # operator-namespace-mismatch names the cause
    if any(p["state"] == "CrashLoopBackOff" for p in view["operator_pods"]):
        return []  # operator-crashloop names the cause
    ns = view["operator_namespace"]
    evidence = [describe(p) for p in view["operator_pods"]] or [f"no gpu-operator pod in namespace {ns}"]
    return [
        finding(
            "operator-not-running",
            "error",
            {"kind": "Deployment", "namespace": ns, "name": "gpu-operator"},
            None,
            evidence,
            "the GPU Operator is not running, so no ClusterPolicy is reconciled",
            f"kubectl -n {ns} describe deployment gpu-operator; "
            "check that operator_namespace is where the chart is installed",
        )
    ]


CP_REASONS = {
    "NFDLabelsMissing": (
        "no node carries NFD labels: Node Feature Discovery is not running or its PCI whitelist misses "
        "classes 0300/0302",
        "enable NFD (Helm nfd.enabled=true) or deploy it, and check the nfd-worker pods",
    ),
    "NoGPUNodes": (
        "no node has an NVIDIA PCI NFD label (feature.node.kubernetes.io/pci-10de.present=true)",
        "check that the GPU nodes run nfd-worker and that their GPUs are on the PCI bus",
    ),
    "OperandNotReady": ("an operand is not ready on some node", "see the node findings of this diagnosis"),
    "DriverNotReady": ("the driver is not ready on some node", "see the driver findings of this diagnosis"),
    "ReconcileFailed": ("the operator failed to reconcile the ClusterPolicy", "fix the error in the condition message"),
    "PrerequisiteNotMet": ("a prerequisite of the ClusterPolicy is not met", "fix what the condition message names"),
}


def rule_cluster_policy(view):
    """More than one ClusterPolicy -> which is ignored; the active one notReady -> its condition's reason."""
    cps = view["cluster_policies"]
    out = []
    active = next((c for c in cps["objects"] if c["active"]), None)
    for cp in cps["objects"]:
        if cp["active"]:
            continue
        out.append(
            finding(
                "clusterpolicy-ignored",
                "warning",
                {"kind": "ClusterPolicy", "namespace": None, "name": cp["name"]},
                None,
                [
                    f"{len(cps['objects'])} ClusterPolicies",
                    f"{cp['name']} created {cp['created']}, state {cp['state']}",
                    f"{active['name']} created {active['created']}, state {active['state']}",
                ],
                f"the operator reconciles only the oldest ClusterPolicy ({active['name']}); {cp['name']} is ignored",
                f"kubectl delete clusterpolicy {cp['name']} after moving its settings into {active['name']}",
            )
        )
    if active is None:
        return out
    obj = {"kind": "ClusterPolicy", "namespace": None, "name": active["name"]}
    if active["state"] == "notReady":
        err = next((c for c in active["conditions"] if c["type"] == "Error" and c["status"] == "True"), None)
        err = err or next((c for c in active["conditions"] if c["type"] == "Ready"), None) or {}
        cause, fix = CP_REASONS.get(err.get("reason"), ("the ClusterPolicy is not ready", "see the node findings"))
        out.append(
            finding(
                "clusterpolicy-not-ready",
                "error",
                obj,
                None,
                [f"state notReady, condition {err.get('type')} reason {err.get('reason')}: {err.get('message')}"],
                cause,
                fix,
            )
        )
    elif not active["state"]:
        out.append(
            finding(
                "clusterpolicy-not-reconciled",
                "warning",
                obj,
                None,
                ["status.state is empty"],
                "the ClusterPolicy has not been reconciled yet (operator not running or just started)",
                "check the gpu-operator pod",
            )
        )
    return out


def rule_operator_installed(view):
    """GPU nodes but no operator CRD -> informational."""
    out = []
    vendors = {n["vendor"] for n in view["nodes"]}
    if "nvidia" in vendors and not view["cluster_policies"]["installed"]:
        out.append(
            finding(
                "nvidia-operator-not-installed",
                "info",
                {"kind": "CustomResourceDefinition", "namespace": None, "name": "clusterpolicies.nvidia.com"},
                None,
                ["CRD clusterpolicies.nvidia.com not installed"],
                "the NVIDIA GPU Operator is not installed",
                "install it (gpuops.platform gpu_operator role) unless the nodes are managed otherwise",
            )
        )
    if "amd" in vendors and not view["device_configs"]["installed"]:
        out.append(
            finding(
                "amd-operator-not-installed",
                "info",
                {"kind": "CustomResourceDefinition", "namespace": None, "name": "deviceconfigs.amd.com"},
                None,
                ["CRD deviceconfigs.amd.com not installed"],
                "the AMD GPU Operator is not installed",
                "install it (chart rocm/gpu-operator-charts) unless the nodes are managed otherwise",
            )
        )
    return out


def rule_host_driver_conflict(view):
    """Host driver and driver container both present -> the cause of the node's NotReady (or its other failing
    condition); a driver pod beside a host driver on a healthy node is still reported."""
    out = []
    for node in view["nodes"]:
        name = node["name"]
        driver = pods_by_role(view, name, "nvidia").get("driver")
        if driver is None or not host_driver_loaded(view, name):
            continue
        evidence = [_host_driver_evidence(view, name), describe(driver)]
        problems = _node_problems(node)
        if problems:
            out.append(
                finding(
                    "node-not-ready",
                    "error",
                    node_ref(name),
                    name,
                    evidence + problems,
                    "host driver and driver container both present: the driver container's unload/load of the "
                    "NVIDIA modules conflicts with the host driver and takes the node down",
                    DISABLE_DRIVER_FIX,
                )
            )
            continue
        out.append(
            finding(
                "host-driver-conflict",
                "warning" if driver["ready"] else "error",
                pod_ref(driver),
                name,
                evidence,
                "host driver and driver container both present on the node",
                DISABLE_DRIVER_FIX,
            )
        )
    return out


def rule_node_not_ready(view):
    """GPU node NotReady (or with another failing condition) without a known GPU cause."""
    out = []
    for node in view["nodes"]:
        name = node["name"]
        problems = _node_problems(node)
        if not problems:
            continue
        if pods_by_role(view, name, "nvidia").get("driver") is not None and host_driver_loaded(view, name):
            continue  # rule_host_driver_conflict names the cause
        if not node["ready"]:
            out.append(
                finding(
                    "node-not-ready",
                    "error",
                    node_ref(name),
                    name,
                    problems,
                    "the kubelet on the node is not ready (not posting status, or its container runtime is down)",
                    f"on {name}: systemctl status kubelet containerd; journalctl -u kubelet",
                )
            )
        else:
            out.append(
                finding(
                    "node-condition",
                    "warning",
                    node_ref(name),
                    name,
                    problems,
                    "the node reports a failing condition (resource pressure or a node-problem-detector check)",
                    f"kubectl describe node {name}; fix what the condition names",
                )
            )
    return out


OPERAND_CAUSES = {
    "toolkit": (
        "the container toolkit cannot configure the container runtime (config path or socket wrong for this runtime)",
        "set the toolkit env CONTAINERD_CONFIG/CONTAINERD_SOCKET (or RUNTIME) to the node's runtime paths",
    ),
    "device-plugin": (
        "the device plugin cannot start: NVML not available (driver) or its config (devicePlugin.config) is invalid",
        "check the driver on the node and the device plugin ConfigMap; read the log",
    ),
    "gfd": ("GPU Feature Discovery cannot initialise NVML (driver not ready)", "check the driver on the node"),
    "dcgm-exporter": (
        "DCGM exporter cannot start: driver not ready or the metrics ConfigMap is invalid",
        "check the driver and the dcgm-exporter metrics ConfigMap",
    ),
    "mig-manager": (
        "mig-manager cannot apply the MIG configuration (config invalid for this GPU model)",
        "set nvidia.com/mig.config to a configuration valid for the GPU; read the log",
    ),
}


def rule_operand_crashloop(view):
    """Other operands in CrashLoopBackOff -> driver not ready on that node, else the component's usual cause."""
    out = []
    for pod in view["operand_pods"]:
        r = role(pod)
        if pod["state"] != "CrashLoopBackOff" or r in ("driver", "validator"):
            continue
        name = pod["node"]
        driver = pods_by_role(view, name, "nvidia").get("driver") if pod["vendor"] == "nvidia" else None
        evidence = [describe(pod)]
        logs = f"kubectl logs -n {pod['namespace']} {pod['name']} --previous"
        if driver is not None and not driver["ready"]:
            evidence.append(describe(driver))
            cause, fix = "the driver is not ready on the node", f"fix the driver pod {driver['name']} first"
        else:
            cause, fix = OPERAND_CAUSES.get(r, (f"{pod['component']} exits repeatedly", "read its log"))
        out.append(finding("operand-crashloop", "error", pod_ref(pod), name, evidence, cause, f"{logs}; {fix}"))
    return out


def rule_device_config(view):
    """AMD DeviceConfig status: no node matches its selector, device plugin not everywhere, driver failures."""
    out = []
    amd_nodes = [n for n in view["nodes"] if n["vendor"] == "amd"]
    for dc in view["device_configs"]["objects"]:
        obj = {"kind": "DeviceConfig", "namespace": dc["namespace"], "name": dc["name"]}
        dp = dc["device_plugin"]
        if amd_nodes and not dp.get("nodesMatchingSelectorNumber"):
            out.append(
                finding(
                    "deviceconfig-no-nodes",
                    "warning",
                    obj,
                    None,
                    [f"selector {dc['selector']}", "status.devicePlugin.nodesMatchingSelectorNumber 0"],
                    "no node matches the DeviceConfig selector: the NFD label feature.node.kubernetes.io/amd-gpu is "
                    "missing (NodeFeatureRule not installed or NFD not running)",
                    "install NFD and the AMD chart's NodeFeatureRule, or fix spec.selector",
                )
            )
        elif dp.get("desiredNumber", 0) > dp.get("availableNumber", 0):
            out.append(
                finding(
                    "deviceconfig-not-ready",
                    "warning",
                    obj,
                    None,
                    [f"device plugin available {dp.get('availableNumber', 0)} of {dp.get('desiredNumber')}"],
                    "the AMD device plugin is not available on every selected node",
                    "see the per-node findings and the device plugin pods",
                )
            )
        for node, mod in sorted(dc["node_module_status"].items()):
            status = (mod or {}).get("status") or ""
            if status.endswith("Failed") or status.endswith("Timed-Out"):
                out.append(
                    finding(
                        "amd-driver-install-failed",
                        "error",
                        obj,
                        node,
                        [f"nodeModuleStatus[{node}].status {status}, kernel {mod.get('kernelVersion')}"],
                        "the amdgpu driver module could not be installed on the node",
                        "check the KMM module loader pod on the node and the driver version for this kernel",
                    )
                )
    return out


RULES = (
    rule_operator_installed,
    rule_cluster_policy,
    rule_operator_namespace,
    rule_operator_missing,
    rule_operator_crashloop,
    rule_node_not_ready,
    rule_host_driver_conflict,
    rule_driver_crashloop,
    rule_validator_init,
    rule_operand_pending,
    rule_operand_crashloop,
    rule_gpu_resource_missing,
    rule_device_config,
)


def diagnose(view, rules=RULES):
    findings = []
    for rule in rules:
        findings.extend(rule(view))
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (order[f["severity"]], f["node"] or "", f["id"]))

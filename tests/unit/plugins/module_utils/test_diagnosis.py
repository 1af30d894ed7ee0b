"""Diagnosis rules as a table: (cluster objects, host facts) -> the findings with their object, cause and fix."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.status import _diagnosis
from test_cluster_status import (
    NS,
    cluster_policy,
    crashloop,
    daemonset,
    driver_crashloop,
    gpu_node,
    node,
    operator_pod,
    pod,
    raw,
    ready_pod,
    running,
    unscheduled,
    validator_stuck,
    view_of,
)

DP = "nvidia-device-plugin-daemonset"
DRIVER = "nvidia-driver-daemonset"
TOOLKIT = "nvidia-container-toolkit-daemonset"
VALIDATOR = "nvidia-operator-validator"
CP_READY = [cluster_policy("cluster-policy", "2026-11-01T00:00:00Z", "ready")]
DS = [daemonset(DP, {"nvidia.com/gpu.deploy.device-plugin": "true"})]


def healthy_pods(on="g1", skip=()):
    comps = [DRIVER, TOOLKIT, DP, VALIDATOR]
    return [operator_pod()] + [ready_pod(c, on) for c in comps if c not in skip]


def cluster(nodes=None, pods=None, skip=(), extra=(), cps="ready", dss=None, amd_pods=(), dcs=None):
    """A healthy one-node cluster unless told otherwise; ``cps=None`` means the CRD is not installed."""
    return raw(
        nodes=nodes if nodes is not None else [gpu_node("g1")],
        pods=(pods if pods is not None else healthy_pods(skip=skip)) + list(extra),
        amd_pods=amd_pods,
        daemonsets=list(DS) if dss is None else dss,
        cluster_policies=list(CP_READY) if cps == "ready" else cps,
        device_configs=dcs,
    )


FACTS_OK = {
    "nouveau": {"loaded": False, "in_use": False},
    "nvidia_driver": {"loaded": False, "version": None},
    "kernel": {"release": "5.15.0-119-generic", "headers_installed": True},
    "secure_boot": {"state": "disabled"},
    "nvswitches": [],
    "fabricmanager": {"active": False, "version": None},
}


def facts(**over):
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in FACTS_OK.items()}
    for key, value in over.items():
        if isinstance(value, dict):
            out[key].update(value)
        else:
            out[key] = value
    return {"g1": out}


def dgx_facts(fm_active, fm_version="570.124.06", driver="570.124.06"):
    return facts(
        nvswitches=[{"address": f"0000:0{i}:00.0"} for i in range(4)],
        fabricmanager={"active": fm_active, "version": fm_version},
        nvidia_driver={"loaded": True, "version": driver},
    )


NO_GPU = {"gpus": 0}


def unlabelled(n, *keys):
    for key in keys:
        del n["metadata"]["labels"][key]
    return n


DP_INIT = pod(
    f"{DP}-g1",
    DP,
    on="g1",
    phase="Pending",
    ready=False,
    containers=[],
    init_names=["toolkit-validation"],
    inits=[{"name": "toolkit-validation", "restartCount": 0, "state": {"running": {}}}],
)
TOOLKIT_CRASH = pod(
    f"{TOOLKIT}-g1", TOOLKIT, on="g1", ready=False, containers=[crashloop("nvidia-container-toolkit-ctr")]
)
DP_INIT_PLUGIN = DP_INIT

# (case id, cluster objects, module params, expected findings: (id, severity, object kind, object name, node,
#  a fragment of the cause))
CASES = [
    ("healthy", cluster(), {}, []),
    (
        "no-gpu/device-plugin-ds-missing-on-node",
        cluster(nodes=[gpu_node("g1", gpus=None)], skip=(DP,)),
        {},
        [("gpu-resource-missing", "error", "DaemonSet", DP, "g1", "device-plugin DaemonSet pod missing on the node")],
    ),
    (
        "no-gpu/deploy-label-false",
        cluster(nodes=[gpu_node("g1", gpus=None, labels={"nvidia.com/gpu.deploy.device-plugin": "false"})], skip=(DP,)),
        {},
        [("gpu-resource-missing", "error", "DaemonSet", DP, "g1", "nvidia.com/gpu.deploy.device-plugin=false keeps")],
    ),
    (
        "no-gpu/deploy-label-missing",
        cluster(nodes=[unlabelled(gpu_node("g1", gpus=None), "nvidia.com/gpu.deploy.device-plugin")], skip=(DP,)),
        {},
        [("gpu-resource-missing", "error", "DaemonSet", DP, "g1", "operator has not set nvidia.com/gpu.deploy")],
    ),
    (
        "no-gpu/operator-not-installed",
        cluster(nodes=[gpu_node("g1", gpus=None)], pods=[], cps=None, dss=[]),
        {},
        [
            ("gpu-resource-missing", "error", "Node", "g1", "g1", "GPU Operator is not installed"),
            (
                "nvidia-operator-not-installed",
                "info",
                "CustomResourceDefinition",
                "clusterpolicies.nvidia.com",
                None,
                "",
            ),
        ],
    ),
    (
        "no-gpu/device-plugin-not-ready",
        cluster(nodes=[gpu_node("g1", gpus=None)], skip=(DP,), extra=[DP_INIT]),
        {},
        [("gpu-resource-missing", "error", "Pod", f"{DP}-g1", "g1", "waits in init container toolkit-validation")],
    ),
    (
        "no-gpu/driver-crashloop-no-host-facts",
        cluster(nodes=[gpu_node("g1", gpus=None)], skip=(DRIVER, VALIDATOR), extra=[driver_crashloop("g1")]),
        {},
        [
            ("driver-crashloop", "error", "Pod", f"{DRIVER}-g1", "g1", "kernel/driver mismatch"),
            ("gpu-resource-missing", "error", "Pod", f"{DRIVER}-g1", "g1", "NVIDIA driver not loaded"),
        ],
    ),
    (
        "no-gpu/plugin-ready-driver-not-loaded",
        cluster(nodes=[gpu_node("g1", gpus=None)], skip=(DRIVER,)),
        {"host_facts": facts()},
        [("gpu-resource-missing", "error", "Node", "g1", "g1", "NVIDIA driver not loaded: neither")],
    ),
    (
        "no-gpu/plugin-ready-host-driver-unknown",
        cluster(nodes=[gpu_node("g1", gpus=None)]),
        {},
        [("gpu-resource-missing", "error", "Node", "g1", "g1", "advertises no GPU")],
    ),
    (
        "no-gpu/mig-reconfiguring",
        cluster(nodes=[gpu_node("g1", gpus=None, labels={"nvidia.com/mig.config.state": "pending"})]),
        {},
        [("gpu-resource-missing", "warning", "Node", "g1", "g1", "MIG reconfiguration in progress")],
    ),
    (
        "no-gpu/mig-failed",
        cluster(nodes=[gpu_node("g1", gpus=None, labels={"nvidia.com/mig.config.state": "failed"})]),
        {},
        [("gpu-resource-missing", "error", "Node", "g1", "g1", "MIG reconfiguration failed")],
    ),
    (
        "no-gpu/operands-disabled",
        cluster(nodes=[gpu_node("g1", gpus=None, labels={"nvidia.com/gpu.deploy.operands": "false"})], pods=[]),
        {},
        [
            ("operator-not-running", "error", "Deployment", "gpu-operator", None, "not running"),
            ("gpu-resource-missing", "info", "Node", "g1", "g1", "operands are disabled"),
        ],
    ),
    (
        "mig-mixed-counts-as-gpus",
        cluster(nodes=[gpu_node("g1", gpus=0, alloc={"nvidia.com/mig-1g.10gb": "56"})]),
        {},
        [],
    ),
    (
        "driver-crashloop/nouveau",
        cluster(skip=(DRIVER,), extra=[driver_crashloop("g1")]),
        {"host_facts": facts(nouveau={"loaded": True, "in_use": True})},
        [("driver-crashloop", "error", "Pod", f"{DRIVER}-g1", "g1", "nouveau is loaded")],
    ),
    (
        "driver-crashloop/headers-missing",
        cluster(skip=(DRIVER,), extra=[driver_crashloop("g1")]),
        {"host_facts": facts(kernel={"headers_installed": False})},
        [("driver-crashloop", "error", "Pod", f"{DRIVER}-g1", "g1", "no kernel headers for the running kernel")],
    ),
    (
        "driver-crashloop/secure-boot",
        cluster(skip=(DRIVER,), extra=[driver_crashloop("g1")]),
        {"host_facts": facts(secure_boot={"state": "enabled"})},
        [("driver-crashloop", "error", "Pod", f"{DRIVER}-g1", "g1", "Secure Boot")],
    ),
    (
        "driver-crashloop/kernel-mismatch",
        cluster(skip=(DRIVER,), extra=[driver_crashloop("g1")]),
        {"host_facts": facts()},
        [("driver-crashloop", "error", "Pod", f"{DRIVER}-g1", "g1", "does not build or load on kernel 5.15.0-119")],
    ),
    (
        "validator/driver-step-names-driver-pod",
        cluster(skip=(DRIVER, VALIDATOR), extra=[driver_crashloop("g1"), validator_stuck("g1", "driver-validation")]),
        {"host_facts": facts(nouveau={"loaded": True})},
        [
            ("driver-crashloop", "error", "Pod", f"{DRIVER}-g1", "g1", "nouveau"),
            ("validator-init-stuck", "error", "Pod", f"{DRIVER}-g1", "g1", "the driver is not ready on the node"),
        ],
    ),
    (
        "validator/driver-step-no-driver",
        cluster(skip=(DRIVER, VALIDATOR), extra=[validator_stuck("g1", "driver-validation")]),
        {"host_facts": facts()},
        [("validator-init-stuck", "error", "Node", "g1", "g1", "no driver on the node")],
    ),
    (
        "validator/toolkit-step-names-toolkit",
        cluster(skip=(TOOLKIT, VALIDATOR), extra=[TOOLKIT_CRASH, validator_stuck("g1", "toolkit-validation")]),
        {},
        [
            ("operand-crashloop", "error", "Pod", f"{TOOLKIT}-g1", "g1", "cannot configure the container runtime"),
            ("validator-init-stuck", "error", "Pod", f"{TOOLKIT}-g1", "g1", "Container Toolkit is not ready"),
        ],
    ),
    (
        "validator/cuda-step-fabricmanager-down",
        cluster(skip=(VALIDATOR, DRIVER), extra=[validator_stuck("g1", "cuda-validation")]),
        {"host_facts": dgx_facts(fm_active=False)},
        [("validator-init-stuck", "error", "Node", "g1", "g1", "nvidia-fabricmanager is not running")],
    ),
    (
        "validator/cuda-step-fabricmanager-version",
        cluster(skip=(VALIDATOR, DRIVER), extra=[validator_stuck("g1", "cuda-validation")]),
        {"host_facts": dgx_facts(fm_active=True, fm_version="570.86.15")},
        [("validator-init-stuck", "error", "Node", "g1", "g1", "version differs from the driver's")],
    ),
    (
        "validator/cuda-step-no-facts",
        cluster(skip=(VALIDATOR,), extra=[validator_stuck("g1", "cuda-validation")]),
        {},
        [("validator-init-stuck", "error", "Node", "g1", "g1", "nvidia-fabricmanager not running")],
    ),
    (
        "validator/plugin-step",
        cluster(skip=(VALIDATOR, DP), extra=[validator_stuck("g1", "plugin-validation"), DP_INIT_PLUGIN]),
        {},
        [("validator-init-stuck", "error", "Pod", f"{DP}-g1", "g1", "device plugin does not advertise GPUs")],
    ),
    (
        "pending/nfd-labels-missing",
        cluster(
            nodes=[gpu_node("g1"), node("g2", labels={"feature.node.kubernetes.io/cpu-model.vendor_id": "Intel"})],
            extra=[unscheduled(DRIVER, "g2", {"nvidia.com/gpu.deploy.driver": "true"})],
        ),
        {},
        [("operand-pending-labels", "error", "Pod", f"{DRIVER}-g2", "g2", "NFD labels missing on node g2")],
    ),
    (
        "pending/labels-present-other-cause",
        cluster(extra=[unscheduled("nvidia-dcgm-exporter", "g1", {"nvidia.com/gpu.present": "true"})]),
        {},
        [("operand-pending", "warning", "Pod", "nvidia-dcgm-exporter-g1", "g1", "cannot place the pod")],
    ),
    (
        "pending/node-gone",
        cluster(extra=[unscheduled(DP, "gone", {})]),
        {},
        [("operand-pending", "warning", "Pod", f"{DP}-gone", "gone", "does not exist any more")],
    ),
    (
        "operator-crashloop",
        cluster(pods=healthy_pods()[1:] + [operator_pod("crash")]),
        {},
        [("operator-crashloop", "error", "Pod", "gpu-operator-7d9f-abcde", "cpu-0", "Kubernetes version")],
    ),
    (
        "operator-missing",
        cluster(pods=healthy_pods()[1:]),
        {},
        [("operator-not-running", "error", "Deployment", "gpu-operator", None, "not running")],
    ),
    (
        "clusterpolicy/two-one-ignored",
        cluster(cps=[*CP_READY, cluster_policy("my-policy", "2026-11-20T00:00:00Z", "ignored")]),
        {},
        [("clusterpolicy-ignored", "warning", "ClusterPolicy", "my-policy", None, "reconciles only the oldest")],
    ),
    (
        "clusterpolicy/not-ready-nfd",
        cluster(
            cps=[
                cluster_policy(
                    "cluster-policy",
                    "t",
                    "notReady",
                    [
                        {"type": "Ready", "status": "False", "reason": "Error"},
                        {"type": "Error", "status": "True", "reason": "NFDLabelsMissing", "message": "no NFD labels"},
                    ],
                )
            ]
        ),
        {},
        [("clusterpolicy-not-ready", "error", "ClusterPolicy", "cluster-policy", None, "Node Feature Discovery")],
    ),
    (
        "clusterpolicy/not-reconciled",
        cluster(cps=[cluster_policy("cluster-policy", "t", None)]),
        {},
        [("clusterpolicy-not-reconciled", "warning", "ClusterPolicy", "cluster-policy", None, "not been reconciled")],
    ),
    (
        "host-driver/node-not-ready",
        cluster(nodes=[gpu_node("g1", ready=False)], skip=(DRIVER,), extra=[driver_crashloop("g1")]),
        {"host_facts": facts(nvidia_driver={"loaded": True, "version": "570.124.06"})},
        [("node-not-ready", "error", "Node", "g1", "g1", "host driver and driver container both present")],
    ),
    (
        "host-driver/pre-installed-label",
        cluster(nodes=[gpu_node("g1", labels={"nvidia.com/gpu.deploy.driver": "pre-installed"})]),
        {},
        [("host-driver-conflict", "warning", "Pod", f"{DRIVER}-g1", "g1", "both present")],
    ),
    (
        "node-not-ready/generic",
        cluster(nodes=[gpu_node("g1", ready=False)]),
        {},
        [("node-not-ready", "error", "Node", "g1", "g1", "kubelet")],
    ),
    (
        "operand-crashloop/after-driver",
        cluster(
            skip=(DRIVER, DP),
            extra=[driver_crashloop("g1"), pod(f"{DP}-g1", DP, on="g1", ready=False, containers=[crashloop("dp")])],
        ),
        {"host_facts": facts()},
        [
            ("driver-crashloop", "error", "Pod", f"{DRIVER}-g1", "g1", "kernel/driver mismatch"),
            ("operand-crashloop", "error", "Pod", f"{DP}-g1", "g1", "the driver is not ready on the node"),
        ],
    ),
]


CONFLICT = {"type": "GpuOpsHostDriverConflict", "status": "True", "reason": "HostDriver", "message": "conflict"}
PRESSURE = {"type": "MemoryPressure", "status": "True", "reason": "KubeletHasInsufficientMemory", "message": "low"}
TOOLKIT_NOT_READY = pod(
    f"{TOOLKIT}-g1", TOOLKIT, on="g1", ready=False, containers=[running("nvidia-container-toolkit-ctr", ready=False)]
)
CASES += [
    (
        "host-driver/from-crash-message-and-condition",
        cluster(
            nodes=[gpu_node("g1", gpus=None, conditions=[CONFLICT])],
            skip=(DRIVER,),
            extra=[driver_crashloop("g1", message="nvidia driver already loaded on the host")],
        ),
        {},
        [
            ("gpu-resource-missing", "error", "Pod", f"{DRIVER}-g1", "g1", "conflicts with a driver on the host"),
            ("node-not-ready", "error", "Node", "g1", "g1", "host driver and driver container both present"),
        ],
    ),
    (
        "operator-namespace-mismatch",
        cluster(
            pods=healthy_pods()[1:],
            cps=[
                {
                    **cluster_policy("cluster-policy", "t"),
                    "status": {"state": "ready", "namespace": "nvidia-gpu-operator"},
                }
            ],
        ),
        {},
        [("operator-namespace-mismatch", "warning", "ClusterPolicy", "cluster-policy", None, "nvidia-gpu-operator")],
    ),
    (
        "node-condition/pressure",
        cluster(nodes=[gpu_node("g1", conditions=[PRESSURE])]),
        {},
        [("node-condition", "warning", "Node", "g1", "g1", "failing condition")],
    ),
    (
        "validator/driver-step-driver-ready",
        cluster(skip=(VALIDATOR,), extra=[validator_stuck("g1", "driver-validation")]),
        {},
        [("validator-init-stuck", "error", "Pod", f"{VALIDATOR}-g1", "g1", "driverInstallDir")],
    ),
    (
        "toolkit-not-ready/plugin-waits",
        cluster(
            nodes=[gpu_node("g1", gpus=None)],
            skip=(TOOLKIT, VALIDATOR, DP),
            extra=[TOOLKIT_NOT_READY, validator_stuck("g1", "toolkit-validation"), DP_INIT],
        ),
        {},
        [
            (
                "gpu-resource-missing",
                "error",
                "Pod",
                f"{TOOLKIT}-g1",
                "g1",
                "waits in init container toolkit-validation",
            ),
            ("validator-init-stuck", "error", "Pod", f"{TOOLKIT}-g1", "g1", "toolkit pod is NotReady"),
        ],
    ),
]


def _amd_node(name="a1", gpus=None):
    alloc = {"amd.com/gpu": str(gpus)} if gpus is not None else {}
    return node(name, labels={"feature.node.kubernetes.io/amd-gpu": "true"}, alloc=alloc)


def _device_config(matching=1, desired=1, available=1, modules=None):
    status = {"devicePlugin": {"desiredNumber": desired, "availableNumber": available}}
    if matching:
        status["devicePlugin"]["nodesMatchingSelectorNumber"] = matching
    if modules:
        status["nodeModuleStatus"] = modules
    return {
        "metadata": {"name": "default", "namespace": "kube-amd-gpu"},
        "spec": {"selector": {"feature.node.kubernetes.io/amd-gpu": "true"}},
        "status": status,
    }


AMD_DP = ready_pod("default-device-plugin", "a1", ns="kube-amd-gpu")
CASES += [
    (
        "amd/healthy",
        cluster(nodes=[_amd_node(gpus=8)], pods=[], cps=None, amd_pods=[AMD_DP], dcs=[_device_config()]),
        {},
        [],
    ),
    (
        "amd/no-deviceconfig",
        cluster(nodes=[_amd_node()], pods=[], cps=None, dcs=[]),
        {},
        [("gpu-resource-missing", "error", "Node", "a1", "a1", "no DeviceConfig exists")],
    ),
    (
        "amd/crd-missing",
        cluster(nodes=[_amd_node(gpus=8)], pods=[], cps=None, amd_pods=[AMD_DP], dcs=None),
        {},
        [("amd-operator-not-installed", "info", "CustomResourceDefinition", "deviceconfigs.amd.com", None, "AMD")],
    ),
    (
        "amd/selector-matches-nothing",
        cluster(nodes=[_amd_node(gpus=8)], pods=[], cps=None, amd_pods=[AMD_DP], dcs=[_device_config(matching=0)]),
        {},
        [("deviceconfig-no-nodes", "warning", "DeviceConfig", "default", None, "feature.node.kubernetes.io/amd-gpu")],
    ),
    (
        "amd/driver-install-failed",
        cluster(
            nodes=[_amd_node(gpus=8)],
            pods=[],
            cps=None,
            amd_pods=[AMD_DP],
            dcs=[_device_config(modules={"a1": {"status": "Upgrade-Failed", "kernelVersion": "6.8.0-45-generic"}})],
        ),
        {},
        [("amd-driver-install-failed", "error", "DeviceConfig", "default", "a1", "amdgpu driver module")],
    ),
    (
        "amd/plugin-ready-no-gpu",
        cluster(nodes=[_amd_node()], pods=[], cps=None, amd_pods=[AMD_DP], dcs=[_device_config()]),
        {},
        [("gpu-resource-missing", "error", "Node", "a1", "a1", "amdgpu driver is not loaded")],
    ),
]


# Cordoned and tainted GPU nodes (issue 27): a cordon is info when a gpuops step set it and says so (onboarding's
# annotation, the GPU Operator's driver upgrade state label, the SR-IOV config daemon's drain), a warning that names
# the alert, the fault class and the way back when the remediation quarantined the node, a warning otherwise;
# NoSchedule/NoExecute taints the GPU stack does not tolerate are a warning with the taint in the evidence.
# (case id, node spec, labels, annotations, expected findings: (id, severity), fragments of cause, evidence, fix)
ONBOARD_MARK = {"gpuops.platform/onboarding-cordoned": "host preparation needs a reboot"}
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
CORDONED = {"unschedulable": True, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}
# what playbooks/remediate.yml leaves on a quarantined node (status/_remediation_marks.py)
QUARANTINE_MARKS = {
    "gpuops.platform/remediation.alert": "GPUXidFallenOffBus",
    "gpuops.platform/remediation.fault-class": "bus",
    "gpuops.platform/remediation.gpu-index": "3",
    "gpuops.platform/remediation.gpu-uuid": "GPU-5c6f1a2b-0000-1111-2222-333344445555",
    "gpuops.platform/remediation.gpu-pci-bus-id": "00000000:17:00.0",
    "gpuops.platform/remediation.fault-since": "2026-11-28T08:00:00Z",
    "gpuops.platform/remediation.at": "2026-11-28T08:00:04Z",
    "gpuops.platform/remediation.by": "gpuops",
    "gpuops.platform/remediation.cordoned": "true",
}
QUARANTINE_TAINT = {"key": "gpuops.platform/quarantined", "value": "bus", "effect": "NoSchedule"}
SCHEDULING_CASES = [
    ("schedulable", {}, {}, {}, [], ()),
    (
        "cordoned-by-hand",
        CORDONED,
        {},
        {},
        [("node-cordoned", "warning")],
        ("no gpuops step", "spec.unschedulable=true", "kubectl uncordon g1"),
    ),
    (
        "cordoned-by-onboarding",
        CORDONED,
        {},
        ONBOARD_MARK,
        [("node-cordoned", "info")],
        ("onboarding", "gpuops.platform/onboarding-cordoned", "onboard_node.yml"),
    ),
    (
        "cordoned-by-driver-upgrade",
        CORDONED,
        {UPGRADE_STATE: "pod-restart-required"},
        {},
        [("node-cordoned", "info")],
        ("driver upgrade", f"{UPGRADE_STATE}=pod-restart-required", "upgrade"),
    ),
    (
        "cordoned-before-the-driver-upgrade",
        CORDONED,
        {UPGRADE_STATE: "drain-required"},
        {"nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable": "true"},
        [("node-cordoned", "warning")],
        ("no gpuops step", "initial-state.unschedulable=true", "kubectl uncordon g1"),
    ),
    (
        "cordoned-after-a-failed-driver-upgrade",
        CORDONED,
        {UPGRADE_STATE: "upgrade-failed"},
        {},
        [("node-cordoned", "warning")],
        ("driver upgrade failed", f"{UPGRADE_STATE}=upgrade-failed", "driver pod"),
    ),
    (
        "cordoned-by-the-sriov-drain",
        CORDONED,
        {},
        {"sriovnetwork.openshift.io/current-state": "Draining"},
        [("node-cordoned", "info")],
        ("SR-IOV", "sriovnetwork.openshift.io/current-state=Draining", "SriovNetworkNodeState"),
    ),
    (
        "quarantined-by-remediation",
        {**CORDONED, "taints": [*CORDONED["taints"], QUARANTINE_TAINT]},
        {"gpuops.platform/remediation": "quarantined"},
        {**QUARANTINE_MARKS, "gpuops.platform/remediation.taint": "gpuops.platform/quarantined=bus:NoSchedule"},
        [("node-cordoned", "warning")],  # the quarantine's taint is in the cordon's finding, no node-tainted one
        (
            "gpuops remediation quarantined the node after GPUXidFallenOffBus (fault class bus) on GPU 3 (GPU-5c6f",
            "label gpuops.platform/remediation=quarantined",
            "taint gpuops.platform/quarantined=bus:NoSchedule (the quarantine's)",
            "re-validates the node",
            "playbooks/remediate.yml",
            "docs/remediation.md, Return",
        ),
    ),
    (
        "handed-to-break-fix",
        CORDONED,
        {"gpuops.platform/remediation": "break-fix"},
        {**QUARANTINE_MARKS, "gpuops.platform/remediation.break-fix": "2026-11-28T08:05:00Z"},
        [("node-cordoned", "warning")],
        ("handed it to break-fix", "waits for a person", "repair the GPU of g1", "at 2026-11-28T08:05:00Z"),
    ),
    (
        "quarantined-after-a-person-cordoned-it",
        CORDONED,
        {"gpuops.platform/remediation": "quarantined"},
        {k: v for k, v in QUARANTINE_MARKS.items() if not k.endswith(".cordoned")},
        [("node-cordoned", "warning")],
        ("found it cordoned already", "GPUXidFallenOffBus"),
    ),
    (
        "notified-by-remediation-cordoned-by-hand",
        CORDONED,
        {"gpuops.platform/remediation": "notified"},
        {},
        [("node-cordoned", "warning")],
        ("no gpuops step", "kubectl uncordon g1"),
    ),
    (
        "a-foreign-taint-beside-the-quarantine",
        {**CORDONED, "taints": [*CORDONED["taints"], QUARANTINE_TAINT, {"key": "maint", "effect": "NoExecute"}]},
        {"gpuops.platform/remediation": "quarantined"},
        {**QUARANTINE_MARKS, "gpuops.platform/remediation.taint": "gpuops.platform/quarantined=bus:NoSchedule"},
        [("node-cordoned", "warning"), ("node-tainted", "warning")],
        ("taint maint:NoExecute", "GPUXidFallenOffBus"),
    ),
    (
        "upgrade-state-without-cordon",
        {},
        {UPGRADE_STATE: "pod-restart-required"},
        ONBOARD_MARK,
        [],
        (),
    ),
    (
        "gpu-taint-tolerated",
        {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        {},
        {},
        [],
        (),
    ),
    ("prefer-no-schedule", {"taints": [{"key": "team", "value": "ml", "effect": "PreferNoSchedule"}]}, {}, {}, [], ()),
    (
        "condition-taint-left-to-node-not-ready",
        {"taints": [{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]},
        {},
        {},
        [],
        (),
    ),
    (
        "foreign-taint",
        {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]},
        {},
        {},
        [("node-tainted", "warning")],
        ("does not tolerate", "taint dedicated=ml:NoSchedule", "kubectl taint node g1 dedicated=ml:NoSchedule-"),
    ),
    (
        "gpu-taint-noexecute",
        {"taints": [{"key": "nvidia.com/gpu", "effect": "NoExecute"}]},
        {},
        {},
        [("node-tainted", "warning")],
        ("does not tolerate", "taint nvidia.com/gpu:NoExecute", "gpu_operator_tolerations"),
    ),
    (
        "cordoned-and-tainted",
        {**CORDONED, "taints": [*CORDONED["taints"], {"key": "maint", "effect": "NoExecute"}]},
        {},
        ONBOARD_MARK,
        [("node-cordoned", "info"), ("node-tainted", "warning")],
        ("taint maint:NoExecute",),
    ),
]


@pytest.mark.parametrize(
    "spec, labels, annotations, expected, fragments",
    [c[1:] for c in SCHEDULING_CASES],
    ids=[c[0] for c in SCHEDULING_CASES],
)
def test_cordoned_and_tainted_nodes(spec, labels, annotations, expected, fragments):
    data = cluster(nodes=[gpu_node("g1", spec=spec, labels=labels, annotations=annotations)])
    findings = _diagnosis.diagnose(view_of(data))
    assert sorted((f["id"], f["severity"]) for f in findings) == sorted(expected), findings
    for f in findings:
        assert f["object"] == {"kind": "Node", "namespace": None, "name": "g1"} and f["node"] == "g1"
    text = " ".join(f"{f['cause']} {' '.join(f['evidence'])} {f['fix']}" for f in findings)
    for fragment in fragments:
        assert fragment in text, findings


@pytest.mark.parametrize("data, kwargs, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rules(data, kwargs, expected):
    findings = _diagnosis.diagnose(view_of(data, **kwargs))
    got = [(f["id"], f["severity"], f["object"]["kind"], f["object"]["name"], f["node"]) for f in findings]
    assert got == [e[:5] for e in expected], findings
    for f, e in zip(findings, expected, strict=True):
        assert e[5] in f["cause"], f
        assert f["fix"] and f["evidence"], f
        assert set(f) == {"id", "severity", "object", "node", "evidence", "cause", "fix"}


KWOK = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}


# The device-plugin DaemonSet's tolerations (the site's, gpu_operator_tolerations) count as the stack's: a taint it
# tolerates is expected on a GPU node (the lab's kwok taint, a dedicated=gpu pool's taint)
@pytest.mark.parametrize(
    "tolerations, tainted",
    [
        ([], True),
        ([{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}], False),
        ([{"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake"}], False),
        ([{"key": "kwok.x-k8s.io/node", "value": "real", "effect": "NoSchedule"}], True),
        ([{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoExecute"}], True),
        ([{"operator": "Exists"}], False),
    ],
    ids=["none", "exists", "equal-value", "other-value", "other-effect", "everything"],
)
def test_the_operands_tolerations_count(tolerations, tainted):
    ds = daemonset(DP, {"nvidia.com/gpu.deploy.device-plugin": "true"})
    ds["spec"]["template"]["spec"]["tolerations"] = tolerations
    data = cluster(nodes=[gpu_node("g1", spec={"taints": [KWOK]})], dss=[ds])
    view = view_of(data)
    findings = [(f["id"], f["severity"]) for f in _diagnosis.diagnose(view)]
    assert findings == ([("node-tainted", "warning")] if tainted else [])
    assert view["nodes"][0]["scheduling"]["summary"] == (
        "tainted kwok.x-k8s.io/node=fake:NoSchedule" if tainted else "schedulable"
    )


@pytest.mark.parametrize(
    "labels, names, not_named",
    [
        # the operator's deploy label set to false on the node: the fix names that label, not NFD's tolerations
        (
            {"nvidia.com/gpu.deploy.device-plugin": "false"},
            ("kubectl label node g1 nvidia.com/gpu.deploy.device-plugin=true",),
            ("nfd-worker", "tolerations"),
        ),
        # the NFD label missing: the fix is NFD's (its worker, its tolerations)
        (
            {"feature.node.kubernetes.io/pci-10de.present": None, "nvidia.com/gpu.deploy.device-plugin": None},
            ("nfd-worker", "tolerations"),
            ("kubectl label node",),
        ),
    ],
    ids=["deploy-label-false", "nfd-label-missing"],
)
def test_device_plugin_missing_fix_names_the_cause(labels, names, not_named):
    n = gpu_node("g1", gpus=None, labels={k: v for k, v in labels.items() if v is not None})
    unlabelled(n, *(k for k, v in labels.items() if v is None))
    (f,) = _diagnosis.diagnose(view_of(cluster(nodes=[n], skip=(DP,))))
    assert f["id"] == "gpu-resource-missing", f
    for text in names:
        assert text in f["fix"], f
    for text in not_named:
        assert text not in f["fix"], f


def test_validator_evidence_names_the_step():
    data = cluster(skip=(VALIDATOR, TOOLKIT), extra=[validator_stuck("g1", "toolkit-validation"), TOOLKIT_CRASH])
    (f,) = [f for f in _diagnosis.diagnose(view_of(data)) if f["id"] == "validator-init-stuck"]
    assert "init container toolkit-validation" in f["evidence"][0]
    assert f"{NS}/{TOOLKIT}-g1 is CrashLoopBackOff" in f["evidence"][1]


def test_nouveau_fix_names_the_module():
    data = cluster(skip=(DRIVER,), extra=[driver_crashloop("g1")])
    (f,) = _diagnosis.diagnose(view_of(data, host_facts=facts(nouveau={"loaded": True, "in_use": True})))
    assert "gpuops.platform.nouveau_blacklist" in f["fix"] and "nouveau loaded and in use" in f["evidence"][-1]


def test_findings_sorted_errors_first():
    data = cluster(
        nodes=[gpu_node("g1", ready=False)],
        cps=[*CP_READY, cluster_policy("later", "2026-11-21T00:00:00Z", "ignored")],
    )
    sev = [f["severity"] for f in _diagnosis.diagnose(view_of(data))]
    assert sev == sorted(sev, key=_diagnosis.SEVERITIES.index) and sev[0] == "error"


def test_rule_table_is_pluggable():
    def only(view):
        return [
            _diagnosis.finding(
                fid="x", severity="info", obj=_diagnosis.node_ref("n"), node="n", evidence=["e"], cause="c", fix="f"
            )
        ]

    assert [f["id"] for f in _diagnosis.diagnose(view_of(cluster()), rules=(only,))] == ["x"]

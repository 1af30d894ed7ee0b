"""The GPU operator simulators against the real control plane: the ClusterPolicy handler labels GPU nodes,
creates the operand DaemonSets (made real by the DaemonSet controller, the scheduler and kwok), advertises
`nvidia.com/gpu` once its pods are ready, publishes GFD's labels in a NodeFeature that the lab's real
nfd-master puts on the node (and removes when GFD or the ClusterPolicy goes), honours a fault, ignores a
second ClusterPolicy and cleans up after deletion; the DeviceConfig handler advertises `amd.com/gpu`.

Double reconciliation: the lab's own simulator process runs the built-in handlers, which act only on
objects WITHOUT the label `sim.gpuops.io/instance`. Each test runs its own handler instance in-process
(`instance=<test namespace>`) and puts that label on its ClusterPolicy/DeviceConfig and its nodes, so the
lab's simulator leaves them alone (its DaemonSets avoid labelled nodes too) whatever code it runs, and
the test does not depend on restarting it. The operator namespace is the test's namespace.

The ClusterPolicy and DeviceConfig CRDs are created from the fixture charts when the cluster lacks them
and left in place afterwards: deleting a CRD would delete every other test's custom resources.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gpuops_lab.k8s import ensure_crd, wait_for
from gpuops_lab.nodes import NFD_FEATURE_LABELS_ANNOTATION
from gpuops_lab.simulator.faults import FAULTS_ANNOTATION
from gpuops_lab.simulator.framework import RealClient, Simulator
from gpuops_lab.simulator.handlers.amd import DeviceConfigHandler
from gpuops_lab.simulator.handlers.nvidia import (
    INSTANCE_LABEL,
    NODE_NAME_LABEL,
    NODE_OWNER_ANNOTATION,
    ClusterPolicyHandler,
)
from kubernetes import client

REPO = Path(__file__).resolve().parents[3]
CP_CRD = REPO / "tests/fixtures/charts/gpu-operator/v26.7.0/crds/nvidia.com_clusterpolicies.yaml"
DC_CRD = REPO / "tests/fixtures/charts/amd-gpu-operator/v1.5.1/crds/deviceconfig-crd.yaml"
CP = ("nvidia.com", "v1", "clusterpolicies")
DC = ("amd.com", "v1alpha1", "deviceconfigs")
NF = ("nfd.k8s-sigs.io", "v1alpha1", "nodefeatures")
WAIT = 60.0
# labels that go through nfd-master: it batches node updates, and its reflectors back off (about 30 s plus
# jitter) after another test's NFD uninstall deleted the CRDs
NFD_WAIT = 90.0
PRODUCT = "nvidia.com/gpu.product"


def _simulator(cluster: Any, handler: Any) -> Iterator[Simulator]:
    sim = Simulator(RealClient.from_kubeconfig(cluster.kubeconfig), [handler], resync_period=2.0, watch_timeout=30)
    sim.start()
    try:
        assert sim.wait_ready(30), "simulator watches not established within 30s"
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def nvidia_sim(cluster, namespace) -> Iterator[Simulator]:
    ensure_crd(cluster.api_client, CP_CRD)
    yield from _simulator(cluster, ClusterPolicyHandler(instance=namespace, operator_namespace=namespace))


@pytest.fixture
def amd_sim(cluster, namespace) -> Iterator[Simulator]:
    ensure_crd(cluster.api_client, DC_CRD)
    yield from _simulator(cluster, DeviceConfigHandler(instance=namespace))


@pytest.fixture
def policies(cluster, namespace, nvidia_sim) -> Iterator[Callable[[str], dict]]:
    """create(name) -> ClusterPolicy labelled for this test's simulator instance; all deleted afterwards
    (before the simulator stops, so it can clean the nodes up)."""
    api = client.CustomObjectsApi(cluster.api_client)
    made: list[str] = []

    def create(suffix: str) -> dict:
        name = f"{namespace}-{suffix}"
        body = {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": name, "labels": {INSTANCE_LABEL: namespace}},
            "spec": {
                "operator": {},
                "daemonsets": {
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
                },
                "driver": {"enabled": True, "version": "595.91.07"},
                "toolkit": {"enabled": True},
                "devicePlugin": {"enabled": True},
                "dcgm": {"enabled": False},
                "dcgmExporter": {"enabled": True},
                "gfd": {"enabled": True},
                "nodeStatusExporter": {"enabled": False},
                "migManager": {"enabled": True, "config": {"default": "all-disabled"}},
                "mig": {"strategy": "single"},
            },
        }
        made.append(name)
        return api.create_cluster_custom_object(*CP, body)

    yield create
    for name in made:
        try:
            api.delete_cluster_custom_object(*CP, name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def _label_nodes(core: client.CoreV1Api, names: list[str], instance: str) -> None:
    for name in names:
        core.patch_node(name, {"metadata": {"labels": {INSTANCE_LABEL: instance}}})


def _node(core: client.CoreV1Api, name: str) -> client.V1Node:
    return core.read_node(name)


def _gpus(core: client.CoreV1Api, name: str, resource: str = "nvidia.com/gpu") -> str | None:
    n = _node(core, name)
    cap, alloc = (n.status.capacity or {}).get(resource), (n.status.allocatable or {}).get(resource)
    assert cap == alloc, f"{name}: capacity {resource}={cap} but allocatable {alloc}"
    return alloc


def _labels(core: client.CoreV1Api, name: str, prefix: str = "nvidia.com/") -> dict[str, str]:
    return {k: v for k, v in (_node(core, name).metadata.labels or {}).items() if k.startswith(prefix)}


def _nfd_labels(core: client.CoreV1Api, name: str) -> list[str]:
    """The labels nfd-master says it manages on the node (its annotation)."""
    return ((_node(core, name).metadata.annotations or {}).get(NFD_FEATURE_LABELS_ANNOTATION) or "").split(",")


def _gfd_feature(custom: client.CustomObjectsApi, namespace: str, node: str) -> dict | None:
    try:
        return custom.get_namespaced_custom_object(NF[0], NF[1], namespace, NF[2], f"nvidia-features-for-{node}")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _status(api: client.CustomObjectsApi, name: str) -> dict:
    return api.get_cluster_custom_object(*CP, name).get("status") or {}


def _condition(status: dict, ctype: str) -> dict:
    return next((c for c in status.get("conditions") or () if c.get("type") == ctype), {})


def _driver_pod(core: client.CoreV1Api, namespace: str, node: str) -> client.V1Pod | None:
    pods = core.list_namespaced_pod(
        namespace, label_selector="app=nvidia-driver-daemonset", field_selector=f"spec.nodeName={node}"
    ).items
    return next((p for p in pods if p.metadata.deletion_timestamp is None), None)


def _waiting_reason(pod: client.V1Pod | None) -> str | None:
    for cs in (pod.status.container_statuses if pod and pod.status else None) or ():
        if cs.state and cs.state.waiting:
            return cs.state.waiting.reason
    return None


def test_cluster_policy_operands_resources_faults_and_singleton(cluster, namespace, add_nodes, policies):
    core = client.CoreV1Api(cluster.api_client)
    apps = client.AppsV1Api(cluster.api_client)
    custom = client.CustomObjectsApi(cluster.api_client)
    gpu_nodes = add_nodes("dgx-h100", 2)
    [cpu_node] = add_nodes("cpu-only", 1)
    _label_nodes(core, [*gpu_nodes, cpu_node], namespace)
    cp = policies("a")
    name = cp["metadata"]["name"]

    # operands land on the GPU nodes, which then advertise their GPUs; the ClusterPolicy goes ready
    def all_ready() -> bool:
        return all(_gpus(core, n) == "8" for n in gpu_nodes) and _status(custom, name).get("state") == "ready"

    assert wait_for(all_ready), (
        f"GPU nodes not advertising 8 GPUs / ClusterPolicy not ready within {WAIT}s: "
        f"{[(n, _gpus(core, n)) for n in gpu_nodes]}, status {_status(custom, name)}"
    )
    status = _status(custom, name)
    assert status["namespace"] == namespace
    assert _condition(status, "Ready") | {"lastTransitionTime": None} == {
        "type": "Ready",
        "status": "True",
        "reason": "Reconciled",
        "message": "ClusterPolicy is ready as all resources have been successfully reconciled",
        "lastTransitionTime": None,
    }
    # GFD's labels arrive through its NodeFeature and nfd-master
    assert wait_for(lambda: all(PRODUCT in _labels(core, n) for n in gpu_nodes), NFD_WAIT), (
        f"no {PRODUCT} from nfd-master within {NFD_WAIT}s: {[_labels(core, n) for n in gpu_nodes]}"
    )
    labels = _labels(core, gpu_nodes[0])
    for key, value in {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/gpu.deploy.mig-manager": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mig.config": "all-disabled",
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/cuda.driver.major": "595",
    }.items():
        assert labels.get(key) == value, f"{gpu_nodes[0]}: label {key}={labels.get(key)!r}, want {value!r}"
    assert _labels(core, cpu_node) == {} and _gpus(core, cpu_node) is None, "cpu-only node got NVIDIA labels/GPUs"

    dss = {d.metadata.name: d for d in apps.list_namespaced_daemon_set(namespace).items}
    assert set(dss) == {
        "nvidia-driver-daemonset",
        "nvidia-container-toolkit-daemonset",
        "nvidia-operator-validator",
        "nvidia-device-plugin-daemonset",
        "nvidia-dcgm-exporter",
        "gpu-feature-discovery",
        "nvidia-mig-manager",
    }
    for ds in dss.values():
        [ref] = ds.metadata.owner_references
        assert (ref.kind, ref.name, ref.controller) == ("ClusterPolicy", name, True)

    def ds_ready() -> list[str]:  # the DaemonSet controller's status lags behind the pods a little
        return [
            f"{d.metadata.name}: {d.status.number_ready}"
            for d in apps.list_namespaced_daemon_set(namespace).items
            if d.status.number_ready != 2
        ]

    wait_for(lambda: not ds_ready())
    assert not ds_ready(), f"DaemonSets without 2 ready pods after {WAIT}s: {ds_ready()}"
    validator = dss["nvidia-operator-validator"].spec.template.spec
    assert [c.name for c in validator.init_containers] == [
        "driver-validation",
        "toolkit-validation",
        "cuda-validation",
        "plugin-validation",
    ]

    # fault: the driver crash-loops on one node -> no GPUs there, ClusterPolicy notReady
    bad, good = gpu_nodes
    core.patch_node(bad, {"metadata": {"annotations": {FAULTS_ANNOTATION: "driver-crashloop"}}})

    def crashing() -> bool:
        return (
            _waiting_reason(_driver_pod(core, namespace, bad)) == "CrashLoopBackOff"
            and _gpus(core, bad) is None
            and _status(custom, name).get("state") == "notReady"
        )

    assert wait_for(crashing), (
        f"driver-crashloop not shown within {WAIT}s: driver pod {_waiting_reason(_driver_pod(core, namespace, bad))}, "
        f"gpus {_gpus(core, bad)}, status {_status(custom, name)}"
    )
    error = _condition(_status(custom, name), "Error")
    assert error["status"] == "True" and error["reason"] == "OperandNotReady"
    assert "state-driver" in error["message"]
    assert _gpus(core, good) == "8", "the healthy node lost its GPUs"
    assert wait_for(lambda: PRODUCT not in _labels(core, bad), NFD_WAIT), (
        "GFD labels kept on a node whose driver crashes"
    )

    # fault cleared -> back to ready, GFD's labels back
    core.patch_node(bad, {"metadata": {"annotations": {FAULTS_ANNOTATION: None}}})
    assert wait_for(lambda: _gpus(core, bad) == "8" and _status(custom, name).get("state") == "ready"), (
        f"no recovery within {WAIT}s after clearing the fault: gpus {_gpus(core, bad)}, status {_status(custom, name)}"
    )
    assert wait_for(lambda: PRODUCT in _labels(core, bad), NFD_WAIT), f"GFD labels not back on {bad}"

    # a second ClusterPolicy is ignored; the first stays active
    second = policies("b")["metadata"]["name"]
    assert wait_for(lambda: _status(custom, second).get("state") == "ignored"), (
        f"second ClusterPolicy not ignored within {WAIT}s: {_status(custom, second)}"
    )
    assert _status(custom, name).get("state") == "ready"

    # deleting both: the garbage collector removes the DaemonSets, the simulator the labels and resources
    for cp_name in (name, second):
        custom.delete_cluster_custom_object(*CP, cp_name)

    def cleaned() -> bool:
        return (
            not apps.list_namespaced_daemon_set(namespace).items
            and all(_gpus(core, n) is None and not _labels(core, n) for n in gpu_nodes)
            and all(NODE_OWNER_ANNOTATION not in (_node(core, n).metadata.annotations or {}) for n in gpu_nodes)
        )

    assert wait_for(cleaned, NFD_WAIT), (
        f"not cleaned up within {NFD_WAIT}s: "
        f"daemonsets {[d.metadata.name for d in apps.list_namespaced_daemon_set(namespace).items]}, "
        f"labels {[_labels(core, n) for n in gpu_nodes]}"
    )


def test_gfd_labels_come_through_nfd_master(cluster, namespace, add_nodes, policies):
    """GFD publishes a NodeFeature (k8s-device-plugin v0.20.0 internal/lm/output.go); the real nfd-master
    labels the node from it, and removes the labels when GFD is disabled or the ClusterPolicy is deleted
    (the DaemonSet goes, the garbage collector deletes the NodeFeature it owns)."""
    core = client.CoreV1Api(cluster.api_client)
    apps = client.AppsV1Api(cluster.api_client)
    custom = client.CustomObjectsApi(cluster.api_client)
    [node] = add_nodes("dgx-h100", 1)
    _label_nodes(core, [node], namespace)
    name = policies("gfd")["metadata"]["name"]

    assert wait_for(lambda: _labels(core, node).get(PRODUCT) == "NVIDIA-H100-80GB-HBM3", NFD_WAIT), (
        f"{node}: no {PRODUCT} within {NFD_WAIT}s: labels {_labels(core, node)}, NodeFeature "
        f"{_gfd_feature(custom, namespace, node)}, status {_status(custom, name)}"
    )
    assert PRODUCT in _nfd_labels(core, node), "the label is not nfd-master's (not in its annotation)"
    nf = _gfd_feature(custom, namespace, node)
    assert nf["metadata"]["labels"] == {NODE_NAME_LABEL: node}
    assert nf["spec"]["labels"][PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    gfd_ds = apps.read_namespaced_daemon_set("gpu-feature-discovery", namespace)
    owners = [(r["kind"], r.get("controller")) for r in nf["metadata"]["ownerReferences"]]
    assert owners[0] == ("DaemonSet", True) and nf["metadata"]["ownerReferences"][0]["uid"] == gfd_ds.metadata.uid
    assert ("Pod", None) in owners

    # GFD disabled: its DaemonSet and NodeFeature go, nfd-master removes the labels; the operator's stay
    custom.patch_cluster_custom_object(*CP, name, {"spec": {"gfd": {"enabled": False}}})
    assert wait_for(
        lambda: PRODUCT not in _labels(core, node) and _gfd_feature(custom, namespace, node) is None, NFD_WAIT
    ), f"{node}: GFD labels kept {NFD_WAIT}s after GFD was disabled: {_labels(core, node)}"
    assert _labels(core, node).get("nvidia.com/gpu.present") == "true" and _gpus(core, node) == "8"

    # enabled again: back; ClusterPolicy deleted: gone again
    custom.patch_cluster_custom_object(*CP, name, {"spec": {"gfd": {"enabled": True}}})
    assert wait_for(lambda: PRODUCT in _labels(core, node), NFD_WAIT), f"{node}: GFD labels not back"
    custom.delete_cluster_custom_object(*CP, name)
    assert wait_for(lambda: not _labels(core, node) and _gfd_feature(custom, namespace, node) is None, NFD_WAIT), (
        f"{node}: labels left {NFD_WAIT}s after the ClusterPolicy was deleted: {_labels(core, node)}"
    )
    assert not custom.list_namespaced_custom_object(NF[0], NF[1], namespace, NF[2])["items"]


def test_device_config_advertises_amd_gpus(cluster, namespace, add_nodes, amd_sim):
    core = client.CoreV1Api(cluster.api_client)
    custom = client.CustomObjectsApi(cluster.api_client)
    [amd_node] = add_nodes("amd-mi300x", 1)
    [cpu_node] = add_nodes("cpu-only", 1)
    _label_nodes(core, [amd_node, cpu_node], namespace)
    # the chart's rule (amd-gpu-label-nfd-rule, MI300X part): the lab's nfd-master sets the default selector's
    # label from the node's NodeFeature
    rule = f"{namespace}-amd-gpu"
    custom.create_cluster_custom_object(
        "nfd.k8s-sigs.io",
        "v1alpha1",
        "nodefeaturerules",
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeatureRule",
            "metadata": {"name": rule},
            "spec": {
                "rules": [
                    {
                        "name": "amd-gpu",
                        "labels": {"feature.node.kubernetes.io/amd-gpu": "true"},
                        "matchFeatures": [
                            {
                                "feature": "pci.device",
                                "matchExpressions": {
                                    "vendor": {"op": "In", "value": ["1002"]},
                                    "device": {"op": "In", "value": ["74a1"]},
                                },
                            }
                        ],
                    }
                ]
            },
        },
    )
    try:
        _device_config_lifecycle(core, custom, namespace, amd_node, cpu_node)
    finally:
        custom.delete_cluster_custom_object("nfd.k8s-sigs.io", "v1alpha1", "nodefeaturerules", rule)
    assert wait_for(lambda: "feature.node.kubernetes.io/amd-gpu" not in _labels(core, amd_node, "")), (
        "nfd-master kept the label of a deleted NodeFeatureRule"
    )


def _device_config_lifecycle(core, custom, namespace: str, amd_node: str, cpu_node: str) -> None:
    body = {
        "apiVersion": "amd.com/v1alpha1",
        "kind": "DeviceConfig",
        "metadata": {"name": "default", "namespace": namespace, "labels": {INSTANCE_LABEL: namespace}},
        "spec": {
            "selector": {"feature.node.kubernetes.io/amd-gpu": "true"},
            "driver": {"enable": False},
            "devicePlugin": {"enableDevicePlugin": True, "enableNodeLabeller": True},
            "metricsExporter": {"enable": True},
        },
    }
    custom.create_namespaced_custom_object(DC[0], DC[1], namespace, DC[2], body)

    def status() -> dict:
        return custom.get_namespaced_custom_object(DC[0], DC[1], namespace, DC[2], "default").get("status") or {}

    one = {"nodesMatchingSelectorNumber": 1, "desiredNumber": 1, "availableNumber": 1}

    def advertised() -> bool:
        st = status()
        return (
            _gpus(core, amd_node, "amd.com/gpu") == "8"
            and "amd.com/gpu.product-name" in _labels(core, amd_node, "amd.com/")
            and st.get("devicePlugin") == one
            and st.get("metricsExporter") == one
        )

    assert wait_for(advertised), (
        f"amd.com/gpu not advertised within {WAIT}s: {_gpus(core, amd_node, 'amd.com/gpu')}, "
        f"labels {_labels(core, amd_node, 'amd.com/')}, status {status()}"
    )
    assert _condition(status(), "Ready")["reason"] == "OperatorReady"
    labels = _labels(core, amd_node, "")
    assert labels["feature.node.kubernetes.io/amd-gpu"] == "true"
    assert labels["amd.com/gpu.product-name"] == "AMD_Instinct_MI300X"
    assert _gpus(core, cpu_node, "amd.com/gpu") is None

    custom.delete_namespaced_custom_object(DC[0], DC[1], namespace, DC[2], "default")
    assert wait_for(
        lambda: _gpus(core, amd_node, "amd.com/gpu") is None and not _labels(core, amd_node, "amd.com/gpu.")
    ), f"not cleaned up within {WAIT}s: {_labels(core, amd_node, '')}"
    assert _labels(core, amd_node, "")["feature.node.kubernetes.io/amd-gpu"] == "true"  # NFD's, not the operator's

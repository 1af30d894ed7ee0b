"""The simulated NVIDIA Network Operator (NicClusterPolicyHandler): the NICs of the hardware profiles, the device
plugins' selectors, the operands, mofed.wait, RDMA resources, status, faults and cleanup, against the fake client
with a stand-in for the DaemonSet controller."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from gpuops_lab import profiles
from gpuops_lab.simulator.fakeclient import FakeKubeClient, make_pod
from gpuops_lab.simulator.faults import FAULTS_ANNOTATION
from gpuops_lab.simulator.framework import Simulator
from gpuops_lab.simulator.handlers import BUILTIN_HANDLERS
from gpuops_lab.simulator.handlers.network import (
    IGNORE_REASON,
    MOFED_WAIT_LABEL,
    NETWORK_HANDLERS,
    RESOURCE_ANNOTATION,
    NicClusterPolicyHandler,
    profile_nics,
    rdma_resources,
    selector_matches,
    sriov_resources,
    tolerates,
)

NS = "nvidia-network-operator"
API = "mellanox.com/v1alpha1"
RDMA = json.dumps(
    {"configList": [{"resourceName": "rdma_shared_device_a", "rdmaHcaMax": 63, "selectors": {"vendors": ["15b3"]}}]}
)
SPEC = {
    "global": {"repository": "nvcr.io/nvidia/mellanox", "version": "network-operator-v26.4.1"},
    "ofedDriver": {"image": "doca-driver", "version": "doca3.4.1-26.04-1.1.0.0-1"},
    "rdmaSharedDevicePlugin": {"image": "k8s-rdma-shared-dev-plugin", "config": RDMA},
    "secondaryNetwork": {"multus": {"image": "multus-cni"}, "cniPlugins": {"image": "plugins"}},
    "nvIpam": {"image": "nvidia-k8s-ipam", "enableWebhook": False},
}


def test_dgx_nics_as_the_simulated_host_names_them():
    nics = profile_nics(profiles.load("dgx-h100"), rdma_stack=True)
    assert len(nics) == 8
    first = nics[0]
    assert (first["vendor_id"], first["device_id"], first["driver"], first["link_layer"]) == (
        "15b3",
        "1021",
        "mlx5_core",
        "InfiniBand",
    )
    assert first["netdevs"] == ["ibp20s0"] and first["rdma_device"] == "mlx5_0"
    assert [n["rdma_device"] for n in nics] == [f"mlx5_{i}" for i in range(8)]
    # without the RDMA stack: no RDMA device; the IB port has a netdev only with ib_ipoib (loaded on the dgx)
    assert {n["rdma_device"] for n in profile_nics(profiles.load("dgx-h100"), rdma_stack=False)} == {None}
    roce = profile_nics(profiles.load("pcie-l40s"), rdma_stack=True)
    assert roce and all(n["netdevs"][0].endswith("np0") and n["link_layer"] == "Ethernet" for n in roce)
    cpu = profile_nics(profiles.load("cpu-only"), rdma_stack=True)
    assert [(n["vendor_id"], n["rdma_device"]) for n in cpu] == [("8086", None)]


@pytest.mark.parametrize(
    ("selectors", "expected"),
    [
        ({"vendors": ["15b3"]}, True),
        ({"vendors": ["15b3"], "deviceIDs": ["101d"]}, False),  # AND across keys
        ({"deviceIDs": ["101d", "1021"]}, True),  # OR within one
        ({"linkTypes": ["infiniband"]}, True),
        ({"linkTypes": ["ether"]}, False),
        ({"ifNames": ["ibp20s0"]}, True),
        ({"ifNames": ["ibp36s0"]}, False),
        ({"drivers": ["mlx5_core"]}, True),
        ({"devices": ["1021"], "isRdma": True}, True),
        ({"rootDevices": ["0000:14:00.0"]}, True),
        ({}, True),
    ],
)
def test_selectors(selectors, expected):
    nic = profile_nics(profiles.load("dgx-h100"), rdma_stack=True)[0]
    assert selector_matches(selectors, nic) is expected


def test_resources_from_the_plugin_configs():
    nics = profile_nics(profiles.load("dgx-h100"), rdma_stack=True)
    two = {
        "configList": [
            {"resourceName": "ib", "rdmaHcaMax": 8, "selectors": {"linkTypes": ["infiniband"]}},
            {"resourceName": "roce", "rdmaHcaMax": 8, "selectors": {"linkTypes": ["ether"]}},
            {"resourceName": "p", "resourcePrefix": "example.com", "rdmaHcaMax": 2, "selectors": {"vendors": ["15b3"]}},
        ]
    }
    assert rdma_resources(json.dumps(two), nics) == {"rdma/ib": 8, "example.com/p": 2}
    # no RDMA device (mlx5_ib not loaded): nothing advertised
    assert rdma_resources(json.dumps(two), profile_nics(profiles.load("dgx-h100"), rdma_stack=False)) == {}
    hostdev = {
        "resourceList": [
            {
                "resourcePrefix": "nvidia.com",
                "resourceName": "hostdev",
                "selectors": {"vendors": ["15b3"], "isRdma": True},
            }
        ]
    }
    assert sriov_resources(json.dumps(hostdev), nics) == {"nvidia.com/hostdev": 8}
    assert rdma_resources("not json", nics) == {}


# -- the handler against the fake client ---------------------------------------------------------------------
def _selected(tpl: Mapping[str, Any], labels: Mapping[str, str], taints: list[dict[str, Any]] = ()) -> bool:
    spec = tpl["spec"]
    if not all(tolerates(spec.get("tolerations") or (), t) for t in taints if t.get("effect") == "NoSchedule"):
        return False
    terms = (
        (spec.get("affinity") or {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [{}])
    )
    return all(labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items()) and all(
        e["key"] not in labels for t in terms for e in t.get("matchExpressions", ())
    )


def play_daemonsets(client: FakeKubeClient) -> None:
    """A Running/Ready pod per DaemonSet and node it selects; deleted when the node stops matching or the
    DaemonSet is gone."""
    nodes = list(client.objects.get(("v1", "Node"), {}).values())
    daemonsets = client.objects.get(("apps/v1", "DaemonSet"), {})
    for key, ds in list(daemonsets.items()):
        tpl = ds["spec"]["template"]
        for node in nodes:
            name = f"{ds['metadata']['name']}-{node['metadata']['name']}"
            existing = client.obj("v1", "Pod", name, key.namespace)
            selected = _selected(tpl, node["metadata"]["labels"], (node.get("spec") or {}).get("taints") or [])
            if selected and existing is None:
                client.add(
                    make_pod(
                        name,
                        key.namespace,
                        node["metadata"]["name"],
                        owner=ds,
                        labels=tpl["metadata"]["labels"],
                        containers=tuple(c["name"] for c in tpl["spec"]["containers"]),
                    )
                )
            elif not selected and existing is not None:
                client.delete("v1", "Pod", name, key.namespace)
    names = {(k.namespace, k.name) for k in daemonsets}
    for key, pod in list(client.objects.get(("v1", "Pod"), {}).items()):
        refs = pod["metadata"].get("ownerReferences") or ()
        if refs and refs[0].get("kind") == "DaemonSet" and (key.namespace, refs[0]["name"]) not in names:
            client.delete("v1", "Pod", key.name, key.namespace)


class Lab:
    def __init__(self, operator: bool = True) -> None:
        scoped = {(API, "NicClusterPolicy")}
        self.client = FakeKubeClient(cluster_scoped=scoped)
        self.sim = Simulator(self.client, [NicClusterPolicyHandler()])
        if operator:
            self.client.add(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {
                        "name": "network-operator",
                        "namespace": NS,
                        "labels": {"app.kubernetes.io/name": "network-operator"},
                    },
                    "spec": {},
                }
            )

    def node(self, name: str, profile: str, faults: str = "") -> None:
        prof = profiles.load(profile)
        manifest = profiles.node_manifest(name, prof)
        manifest["metadata"]["labels"].update(profiles.nfd_labels(prof))  # what the lab's nfd-master sets
        if faults:
            manifest["metadata"]["annotations"][FAULTS_ANNOTATION] = faults
        self.client.add(manifest)

    def policy(self, name: str = "nic-cluster-policy", spec: Mapping[str, Any] | None = None) -> None:
        self.client.add(
            {"apiVersion": API, "kind": "NicClusterPolicy", "metadata": {"name": name}, "spec": dict(spec or SPEC)}
        )

    def settle(self, rounds: int = 6) -> None:
        for _round in range(rounds):
            play_daemonsets(self.client)
            self.sim.sync()
            self.sim.process_pending()

    def status(self, name: str = "nic-cluster-policy") -> dict:
        return self.client.obj(API, "NicClusterPolicy", name).get("status") or {}

    def allocatable(self, node: str) -> dict[str, str]:
        status = self.client.obj("v1", "Node", node)["status"]
        return {k: v for k, v in status["allocatable"].items() if "/" in k}

    def labels(self, node: str) -> dict[str, str]:
        return self.client.obj("v1", "Node", node)["metadata"]["labels"]


@pytest.fixture
def lab() -> Lab:
    lab = Lab()
    lab.node("dgx-0", "dgx-h100")
    lab.node("cpu-0", "cpu-only")
    return lab


def test_policy_ready_and_dgx_advertises_rdma(lab):
    lab.policy()
    lab.settle()
    assert lab.allocatable("dgx-0") == {"rdma/rdma_shared_device_a": "63"}
    assert lab.allocatable("cpu-0") == {}
    assert lab.labels("dgx-0")[MOFED_WAIT_LABEL] == "false" and MOFED_WAIT_LABEL not in lab.labels("cpu-0")
    assert lab.status() == {
        "state": "ready",
        "appliedStates": [
            {"name": "state-OFED", "state": "ready"},
            {"name": "state-RDMA-device-plugin", "state": "ready"},
            {"name": "state-multus-cni", "state": "ready"},
            {"name": "state-container-networking-plugins", "state": "ready"},
            {"name": "state-nv-ipam-cni", "state": "ready"},
        ],
    }
    daemonsets = {k.name: ds for k, ds in lab.client.objects[("apps/v1", "DaemonSet")].items() if k.namespace == NS}
    assert sorted(daemonsets) == [
        "cni-plugins-ds",
        "kube-multus-ds",
        "mofed-ubuntu22.04-ds",
        "nv-ipam-node",
        "rdma-shared-dp-ds",
    ]
    plugin = daemonsets["rdma-shared-dp-ds"]["spec"]["template"]["spec"]
    assert plugin["nodeSelector"] == {"feature.node.kubernetes.io/pci-15b3.present": "true", MOFED_WAIT_LABEL: "false"}
    assert (
        plugin["containers"][0]["image"]
        == "nvcr.io/nvidia/mellanox/k8s-rdma-shared-dev-plugin:network-operator-v26.4.1"
    )
    assert lab.client.obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "ippools.nv-ipam.nvidia.com")
    # steady state: nothing more to write
    writes = len(lab.client.writes)
    lab.settle(2)
    assert lab.client.writes[writes:] == []


def test_doca_telemetry_runs_on_nic_nodes_once_the_driver_is_ready(lab):
    lab.node("dgx-1", "dgx-h100", faults="network-driver-not-ready")
    dts = {"image": "doca_telemetry", "repository": "nvcr.io/nvidia/doca", "version": "1.25.5-doca3.4.0-host"}
    lab.policy(spec={**SPEC, "docaTelemetryService": dts})
    lab.settle()
    ds = lab.client.obj("apps/v1", "DaemonSet", "doca-telemetry-service", NS)
    tpl = ds["spec"]["template"]
    # upstream's manifest: its own pod label, host network, NIC nodes after the driver
    assert ds["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "doca-telemetry"}
    assert tpl["metadata"]["labels"] == {"app.kubernetes.io/name": "doca-telemetry"}
    assert tpl["spec"]["hostNetwork"] is True
    assert tpl["spec"]["nodeSelector"] == {
        "feature.node.kubernetes.io/pci-15b3.present": "true",
        MOFED_WAIT_LABEL: "false",
    }
    assert tpl["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/doca/doca_telemetry:1.25.5-doca3.4.0-host"
    assert lab.client.obj("v1", "Pod", "doca-telemetry-service-dgx-0", NS) is not None
    assert lab.client.obj("v1", "Pod", "doca-telemetry-service-dgx-1", NS) is None  # its driver is not ready
    assert lab.client.obj("v1", "Pod", "doca-telemetry-service-cpu-0", NS) is None  # no NVIDIA NIC
    assert {"name": "state-doca-telemetry-service", "state": "ready"} in lab.status()["appliedStates"]
    # the section removed: its DaemonSet goes, and its state with it
    lab.client.patch(API, "NicClusterPolicy", "nic-cluster-policy", None, {"spec": {"docaTelemetryService": None}})
    lab.settle()
    assert lab.client.obj("apps/v1", "DaemonSet", "doca-telemetry-service", NS) is None
    assert "state-doca-telemetry-service" not in [s["name"] for s in lab.status()["appliedStates"]]


def test_a_tainted_control_plane_node_is_not_waited_for(lab):
    lab.client.add(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "cp", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
            "status": {"capacity": {}, "allocatable": {}},
        }
    )
    lab.policy()
    lab.settle()
    assert lab.client.obj("v1", "Pod", "kube-multus-ds-cp", NS) is None
    assert lab.status()["state"] == "ready"
    # tolerated through spec.tolerations: the multus pod lands there, and is waited for
    assert tolerates(
        [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
    )
    assert not tolerates(
        [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
    )
    assert tolerates([{"operator": "Exists"}], {"key": "x", "effect": "NoExecute"})
    assert tolerates(
        [{"key": "a", "value": "b", "effect": "NoSchedule"}], {"key": "a", "value": "b", "effect": "NoSchedule"}
    )


def test_only_nic_cluster_policy_is_reconciled(lab):
    lab.policy("my-policy")
    lab.settle()
    assert lab.status("my-policy") == {"state": "ignore", "reason": IGNORE_REASON}
    assert lab.allocatable("dgx-0") == {}


def test_driver_not_ready_keeps_the_device_plugin_off():
    lab = Lab()
    lab.node("dgx-0", "dgx-h100", faults="network-driver-not-ready")
    lab.policy()
    lab.settle()
    assert lab.labels("dgx-0")[MOFED_WAIT_LABEL] == "true"
    assert lab.allocatable("dgx-0") == {}
    states = {s["name"]: s["state"] for s in lab.status()["appliedStates"]}
    assert lab.status()["state"] == "notReady" and states["state-OFED"] == "notReady"
    assert lab.client.obj("v1", "Pod", "rdma-shared-dp-ds-dgx-0", NS) is None


@pytest.mark.parametrize(
    ("fault", "fragment"),
    [
        ("ofed-crashloop-headers", "linux-headers-"),
        ("ofed-crashloop-secureboot", "Key was rejected by service"),
    ],
)
def test_ofed_crashloop_faults_say_why(fault, fragment):
    lab = Lab()
    lab.node("dgx-0", "dgx-h100", faults=fault)
    lab.policy()
    lab.settle()
    assert lab.labels("dgx-0")[MOFED_WAIT_LABEL] == "true" and lab.allocatable("dgx-0") == {}
    pod = lab.client.obj("v1", "Pod", "mofed-ubuntu22.04-ds-dgx-0", NS)
    (status,) = pod["status"]["containerStatuses"]
    assert status["name"] == "mofed-container" and status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert fragment in status["lastState"]["terminated"]["message"]
    assert {s["name"]: s["state"] for s in lab.status()["appliedStates"]}["state-OFED"] == "notReady"


def test_without_the_driver_container_the_hosts_rdma_stack_serves(lab):
    spec = {k: v for k, v in SPEC.items() if k != "ofedDriver"}
    lab.policy(spec=spec)
    lab.settle()
    # the dgx profile loads mlx5_ib: RDMA devices without the driver container
    assert lab.allocatable("dgx-0") == {"rdma/rdma_shared_device_a": "63"}
    assert lab.labels("dgx-0")[MOFED_WAIT_LABEL] == "false"


def test_host_device_mode_advertises_whole_devices(lab):
    config = {
        "resourceList": [
            {
                "resourcePrefix": "nvidia.com",
                "resourceName": "hostdev",
                "selectors": {"vendors": ["15b3"], "isRdma": True},
            }
        ]
    }
    spec = {k: v for k, v in SPEC.items() if k != "rdmaSharedDevicePlugin"}
    spec["sriovDevicePlugin"] = {"image": "sriov-network-device-plugin", "config": json.dumps(config)}
    lab.policy(spec=spec)
    lab.settle()
    assert lab.allocatable("dgx-0") == {"nvidia.com/hostdev": "8"}
    assert "state-SRIOV-device-plugin" in [s["name"] for s in lab.status()["appliedStates"]]


def test_no_operator_no_reconcile():
    lab = Lab(operator=False)
    lab.node("dgx-0", "dgx-h100")
    lab.policy()
    lab.settle()
    assert lab.status() == {}
    assert not lab.client.objects.get(("apps/v1", "DaemonSet"))


def test_deleting_the_policy_removes_what_it_advertised(lab):
    lab.policy()
    lab.settle()
    assert lab.allocatable("dgx-0")
    lab.client.delete(API, "NicClusterPolicy", "nic-cluster-policy")
    lab.settle()
    assert lab.allocatable("dgx-0") == {}
    assert MOFED_WAIT_LABEL not in lab.labels("dgx-0")


def test_registered():
    assert NicClusterPolicyHandler in BUILTIN_HANDLERS


# -- networks -----------------------------------------------------------------------------------------------
def network_lab(operator: bool = True) -> tuple[FakeKubeClient, Simulator]:
    scoped = {(API, k) for k in ("MacvlanNetwork", "HostDeviceNetwork", "IPoIBNetwork")}
    client = FakeKubeClient(cluster_scoped=scoped)
    sim = Simulator(client, [h() for h in NETWORK_HANDLERS])
    if operator:
        client.add(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "no", "namespace": NS, "labels": {"app.kubernetes.io/name": "network-operator"}},
                "spec": {},
            }
        )
    client.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "training"}})
    return client, sim


def settle_networks(sim: Simulator) -> None:
    for _round in range(3):
        sim.sync()
        sim.process_pending()


@pytest.mark.parametrize(
    ("kind", "spec", "config", "annotations"),
    [
        (
            "MacvlanNetwork",
            {"master": "ens1f0np0", "mode": "bridge", "mtu": 9000, "ipam": '{"type": "nv-ipam", "poolName": "p"}'},
            {
                "type": "macvlan",
                "master": "ens1f0np0",
                "mode": "bridge",
                "mtu": 9000,
                "ipam": {"type": "nv-ipam", "poolName": "p"},
            },
            None,
        ),
        (
            "HostDeviceNetwork",
            {"resourceName": "hostdev"},
            {"type": "host-device"},
            {RESOURCE_ANNOTATION: "nvidia.com/hostdev"},
        ),
        ("IPoIBNetwork", {"master": "ibp20s0"}, {"type": "ipoib", "master": "ibp20s0"}, None),
    ],
)
def test_network_writes_its_attachment_definition(kind, spec, config, annotations):
    client, sim = network_lab()
    client.add(
        {"apiVersion": API, "kind": kind, "metadata": {"name": "net"}, "spec": {"networkNamespace": "training", **spec}}
    )
    settle_networks(sim)
    nad = client.obj("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "net", "training")
    assert nad is not None
    assert json.loads(nad["spec"]["config"]) == {"cniVersion": "0.3.1", "name": "net", **config}
    assert (nad["metadata"].get("annotations") or None) == annotations
    assert nad["metadata"]["ownerReferences"][0]["kind"] == kind
    assert client.obj(API, kind, "net")["status"] == {"state": "ready"}


def test_network_in_a_missing_namespace_is_an_error_and_no_operator_no_status():
    client, sim = network_lab()
    client.add(
        {
            "apiVersion": API,
            "kind": "MacvlanNetwork",
            "metadata": {"name": "n"},
            "spec": {"networkNamespace": "nope", "master": "x"},
        }
    )
    settle_networks(sim)
    assert client.obj(API, "MacvlanNetwork", "n")["status"] == {
        "state": "error",
        "reason": "networkNamespace nope not found",
    }
    client, sim = network_lab(operator=False)
    client.add(
        {
            "apiVersion": API,
            "kind": "MacvlanNetwork",
            "metadata": {"name": "n"},
            "spec": {"networkNamespace": "training", "master": "x"},
        }
    )
    settle_networks(sim)
    assert "status" not in client.obj(API, "MacvlanNetwork", "n")
    assert set(NETWORK_HANDLERS) <= set(BUILTIN_HANDLERS)

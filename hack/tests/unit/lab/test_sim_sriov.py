"""The simulated SR-IOV config daemon and device plugin (SriovNetworkNodeStateHandler): the PFs of the hardware
profiles, the VFs created up to numVfs (refused above totalvfs like the kernel), syncStatus, the node resources, the
drain-blocked fault and cleanup, against the fake client; the SriovNetworkNodeState and its spec stand in for what
the real operator writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from gpuops_lab import profiles
from gpuops_lab.simulator.fakeclient import FakeKubeClient
from gpuops_lab.simulator.faults import FAULTS_ANNOTATION
from gpuops_lab.simulator.framework import Simulator
from gpuops_lab.simulator.handlers import BUILTIN_HANDLERS
from gpuops_lab.simulator.handlers.sriov import (
    FAULT_DRAIN_BLOCKED,
    RESOURCES_ANNOTATION,
    STATE_LABEL,
    SriovNetworkNodeStateHandler,
    needs_drain,
    profile_pfs,
    resources,
    sync,
    vf_address,
)

API = "sriovnetwork.openshift.io/v1"
NS = "sriov-network-operator"
PF0, PF1 = "0000:14:00.0", "0000:24:00.0"


def test_dgx_pfs_from_the_profile():
    pfs = profile_pfs(profiles.load("dgx-h100"))
    assert len(pfs) == 8
    assert [(p["address"], p["netdevs"], p["totalvfs"], p["vf_device"]) for p in pfs[:2]] == [
        (PF0, ["ibp20s0"], 16, "101e"),
        (PF1, ["ibp36s0"], 16, "101e"),
    ]
    assert {p["totalvfs"] for p in profile_pfs(profiles.load("cpu-only"))} == {0}  # a NIC without SR-IOV
    assert profile_pfs(None) == []


@pytest.mark.parametrize(
    ("pf", "index", "want"),
    [(PF0, 0, "0000:14:00.1"), (PF0, 6, "0000:14:00.7"), (PF0, 7, "0000:14:01.0"), ("0000:ff:1f.7", 0, "0000:00:00.0")],
)
def test_vf_addresses_follow_offset_and_stride(pf, index, want):
    assert vf_address(pf, index) == want


def iface(addr: str, num: int, *groups: tuple[str, str], external: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "pciAddress": addr,
        "numVfs": num,
        "vfGroups": [{"resourceName": r, "vfRange": v} for r, v in groups],
    }
    if external:
        out["externallyManaged"] = True
    return out


PFS = [
    {"address": PF0, "netdevs": ["ibp20s0"], "totalvfs": 16},
    {"address": PF1, "netdevs": ["ibp36s0"], "totalvfs": 16},
]


@pytest.mark.parametrize(
    ("interfaces", "current", "want"),
    [
        ([], {}, ({PF0: 0, PF1: 0}, "Succeeded")),
        ([iface(PF0, 8)], {}, ({PF0: 8, PF1: 0}, "Succeeded")),
        ([iface(PF0, 16)], {}, ({PF0: 16, PF1: 0}, "Succeeded")),
        ([iface(PF1, 4)], {PF0: 8}, ({PF0: 0, PF1: 4}, "Succeeded")),  # a PF no longer in the spec: 0
        ([iface("0000:99:00.0", 2)], {}, ({PF0: 0, PF1: 0}, "Succeeded")),  # a PF the node lacks: skipped
    ],
)
def test_sync(interfaces, current, want):
    num_vfs, status, errors = sync({"interfaces": interfaces}, PFS, current)
    assert (num_vfs, status, errors) == (*want, [])


def test_above_totalvfs_stops_the_apply_in_progress_as_upstream_daemon_mode():
    # PF0 is first in the status order: refused before any write, PF1 and the resets are not done
    num_vfs, status, errors = sync({"interfaces": [iface(PF0, 32), iface(PF1, 4)]}, PFS, {PF0: 8})
    assert status == "InProgress" and num_vfs == {PF0: 8, PF1: 0}
    assert errors == [
        f"configSriovPFDevice(): fail to set NumVfs for device {PF0} (ibp20s0): cannot config SRIOV device: "
        "NumVfs (32) is larger than TotalVfs (16)"
    ]
    # a PF before the refused one is configured
    num_vfs, status, _e = sync({"interfaces": [iface(PF0, 4), iface(PF1, 17)]}, PFS, {})
    assert status == "InProgress" and num_vfs == {PF0: 4, PF1: 0}


@pytest.mark.parametrize(
    ("interfaces", "current", "want"),
    [
        ([iface(PF0, 8)], {}, False),  # no VFs yet: no drain
        ([iface(PF0, 8)], {PF0: 8}, False),  # nothing changes
        ([iface(PF0, 4)], {PF0: 8}, True),  # VFs in use change
        ([], {PF0: 8}, True),  # the policy went
        ([iface(PF0, 4, external=True)], {PF0: 8}, False),  # externally managed: never changed by the operator
    ],
)
def test_needs_drain_follows_need_to_update_vfs(interfaces, current, want):
    assert needs_drain({"interfaces": interfaces}, current) is want


def test_resources_count_the_vfs_of_each_group():
    spec = {"interfaces": [iface(PF0, 8, ("rail0", "0-7")), iface(PF1, 8, ("rail0", "0-3"), ("rail1", "4-7"))]}
    assert resources(spec, {PF0: 8, PF1: 8}) == {"openshift.io/rail0": 12, "openshift.io/rail1": 4}
    assert resources(spec, {PF0: 0, PF1: 8}, "nvidia.com") == {"nvidia.com/rail0": 4, "nvidia.com/rail1": 4}
    assert resources(spec, {PF0: 4, PF1: 2}) == {"openshift.io/rail0": 6}  # only the VFs that exist


class Lab:
    def __init__(self) -> None:
        self.client = FakeKubeClient()
        self.sim = Simulator(self.client, [SriovNetworkNodeStateHandler()])

    def node(self, name: str, profile: str, faults: str = "") -> None:
        manifest = profiles.node_manifest(name, profiles.load(profile))
        if faults:
            manifest["metadata"]["annotations"][FAULTS_ANNOTATION] = faults
        self.client.add(manifest)

    def state(self, name: str, *interfaces: Mapping[str, Any]) -> None:
        """What the operator writes: the state, then its spec once the status reports interfaces."""
        existing = self.client.obj(API, "SriovNetworkNodeState", name, NS)
        spec = {"interfaces": [dict(i) for i in interfaces]}
        if existing is None:
            self.client.add(
                {
                    "apiVersion": API,
                    "kind": "SriovNetworkNodeState",
                    "metadata": {"name": name, "namespace": NS},
                    "spec": spec,
                }
            )
        else:
            self.client.patch(API, "SriovNetworkNodeState", name, NS, {"spec": spec}, "merge")

    def settle(self, rounds: int = 3) -> None:
        for _round in range(rounds):
            self.sim.sync()
            self.sim.process_pending()

    def status(self, name: str) -> dict[str, Any]:
        return self.client.obj(API, "SriovNetworkNodeState", name, NS).get("status") or {}

    def allocatable(self, node: str) -> dict[str, str]:
        alloc = self.client.obj("v1", "Node", node)["status"]["allocatable"]
        return {k: v for k, v in alloc.items() if k.startswith("openshift.io/")}

    def meta(self, node: str) -> dict[str, Any]:
        return self.client.obj("v1", "Node", node)["metadata"]


@pytest.fixture
def lab() -> Lab:
    lab = Lab()
    lab.node("dgx-0", "dgx-h100")
    return lab


def test_state_reports_the_pfs_then_configures_the_policies_vfs(lab):
    lab.state("dgx-0")  # as the operator creates it: an empty spec
    lab.settle()
    status = lab.status("dgx-0")
    assert status["syncStatus"] == "Succeeded" and status["lastSyncError"] == ""
    assert len(status["interfaces"]) == 8
    first = status["interfaces"][0]
    assert {k: first[k] for k in ("name", "pciAddress", "vendor", "deviceID", "totalvfs", "linkType", "numVfs")} == {
        "name": "ibp20s0",
        "pciAddress": PF0,
        "vendor": "15b3",
        "deviceID": "1021",
        "totalvfs": 16,
        "linkType": "IB",
        "numVfs": 0,
    }
    uid = lab.client.obj(API, "SriovNetworkNodeState", "dgx-0", NS)["metadata"].get("uid") or ""
    assert lab.meta("dgx-0")["labels"][STATE_LABEL] == uid  # the node label change that makes the operator re-read

    lab.state("dgx-0", iface(PF0, 8, ("rail0_ib", "0-7")), iface(PF1, 8, ("rail0_ib", "0-7")))  # the policy applied
    lab.settle()
    status = lab.status("dgx-0")
    assert status["syncStatus"] == "Succeeded"
    by_addr = {i["pciAddress"]: i for i in status["interfaces"]}
    assert by_addr[PF0]["numVfs"] == 8 and len(by_addr[PF0]["Vfs"]) == 8
    assert by_addr[PF0]["Vfs"][0] == {
        "pciAddress": "0000:14:00.1",
        "vfID": 0,
        "vendor": "15b3",
        "deviceID": "101e",
        "driver": "mlx5_core",
    }
    assert lab.allocatable("dgx-0") == {"openshift.io/rail0_ib": "16"}

    # above the firmware limit: refused before the write, the state stays InProgress with the error it had, the VFs
    # and the resource stay
    lab.state("dgx-0", iface(PF0, 32, ("rail0_ib", "0-31")), iface(PF1, 8, ("rail0_ib", "0-7")))
    lab.settle()
    status = lab.status("dgx-0")
    assert status["syncStatus"] == "InProgress" and status["lastSyncError"] == ""
    assert lab.allocatable("dgx-0") == {"openshift.io/rail0_ib": "16"}


def drain_controller(lab: Lab, node: str, current: str) -> None:
    """What the real drain controller writes: the state's current-state."""
    ann = {"sriovnetwork.openshift.io/current-state": current}
    if current == "Idle":
        ann["sriovnetwork.openshift.io/desired-state"] = "Idle"
    lab.client.patch(API, "SriovNetworkNodeState", node, NS, {"metadata": {"annotations": ann}}, "merge")


def test_drain_handshake_under_the_fault(lab):
    lab.node("dgx-1", "dgx-h100", faults=FAULT_DRAIN_BLOCKED)
    lab.state("dgx-1", iface(PF0, 8, ("rail0_ib", "0-7")))
    lab.settle()
    assert lab.status("dgx-1") == {}  # waits for the drain controller's annotations
    drain_controller(lab, "dgx-1", "Idle")
    lab.settle()
    assert lab.status("dgx-1")["syncStatus"] == "Succeeded"  # 0 -> 8 VFs needs no drain
    assert lab.allocatable("dgx-1") == {"openshift.io/rail0_ib": "8"}

    lab.state("dgx-1", iface(PF0, 4, ("rail0_ib", "0-3")))  # VFs in use change: drain first
    lab.settle()
    state = lab.client.obj(API, "SriovNetworkNodeState", "dgx-1", NS)
    assert state["status"]["syncStatus"] == "InProgress"
    assert state["metadata"]["annotations"]["sriovnetwork.openshift.io/desired-state"] == "Drain_Required"
    assert lab.meta("dgx-1")["annotations"]["sriovnetwork.openshift.io/state"] == "Drain_Required"
    assert lab.allocatable("dgx-1") == {"openshift.io/rail0_ib": "8"}
    drain_controller(lab, "dgx-1", "Draining")  # a PodDisruptionBudget keeps it here
    lab.settle()
    assert lab.status("dgx-1")["syncStatus"] == "InProgress"
    drain_controller(lab, "dgx-1", "DrainComplete")
    lab.settle()
    state = lab.client.obj(API, "SriovNetworkNodeState", "dgx-1", NS)
    assert state["status"]["syncStatus"] == "Succeeded"
    assert state["metadata"]["annotations"]["sriovnetwork.openshift.io/desired-state"] == "Idle"
    assert lab.meta("dgx-1")["annotations"]["sriovnetwork.openshift.io/state"] == "Idle"
    assert lab.allocatable("dgx-1") == {"openshift.io/rail0_ib": "4"}


def test_deleting_the_state_removes_what_it_advertised(lab):
    lab.state("dgx-0", iface(PF0, 4, ("rail0_ib", "0-3")))
    lab.settle()
    assert lab.allocatable("dgx-0") == {"openshift.io/rail0_ib": "4"}
    assert RESOURCES_ANNOTATION in lab.meta("dgx-0")["annotations"]
    lab.client.delete(API, "SriovNetworkNodeState", "dgx-0", NS)
    lab.settle()
    assert lab.allocatable("dgx-0") == {}
    assert RESOURCES_ANNOTATION not in lab.meta("dgx-0")["annotations"]
    assert STATE_LABEL not in lab.meta("dgx-0")["labels"]


def test_a_state_without_its_node_is_left_alone():
    lab = Lab()
    lab.state("gone")
    lab.settle()
    assert lab.status("gone") == {}


def test_registered():
    assert SriovNetworkNodeStateHandler in BUILTIN_HANDLERS
    assert FAULT_DRAIN_BLOCKED == "sriov-drain-blocked"

"""Network diagnosis rules as a table: (cluster objects with the network side, host facts) -> the findings with their
object, cause and fix; the network view and its constant number of list requests."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_status as cs
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_views, _diagnosis, _label_selectors
from test_cluster_status import (
    NS,
    cluster_policy,
    crashloop,
    done,
    gpu_node,
    node,
    operator_pod,
    params,
    pod,
    raw,
    running,
)

NET = "nvidia-network-operator"
SRIOV_NS = "sriov-network-operator"
NETWORK = {"namespace": NET, "sriov_namespace": SRIOV_NS}
NIC = {"feature.node.kubernetes.io/pci-15b3.present": "true"}
MOFED = "mofed-ubuntu22.04-ds"
RDMA_DP = "rdma-shared-dp-ds"
RDMA_CONFIG = {
    "configList": [
        {"resourceName": "rdma_shared_ib", "rdmaHcaMax": 63, "selectors": {"vendors": ["15b3"], "deviceIDs": ["1021"]}}
    ]
}
HEADERS_MSG = "E: Unable to locate package linux-headers-5.15.0-119-generic: kernel headers are not installed"
SECURE_BOOT_MSG = "modprobe: ERROR: could not insert 'mlx_compat': Key was rejected by service"


def nic_node(name, rdma=63, wait="false", labels=None, **kw):
    alloc = {"rdma/rdma_shared_ib": str(rdma)} if rdma is not None else {}
    return node(
        name,
        labels={**NIC, **({"network.nvidia.com/operator.mofed.wait": wait} if wait else {}), **(labels or {})},
        alloc=alloc,
        **kw,
    )


def net_pod(component, on, **kw):
    return pod(f"{component}-{on}", component, on=on, ns=NET, **kw)


def ofed_crash(on, message):
    return net_pod(MOFED, on, ready=False, containers=[crashloop("mofed-container", message=message)])


def policy(name="nic-cluster-policy", state="ready", applied=None, config=None):
    status = {}
    if state is not None:
        status = {"state": state, "appliedStates": applied or [{"name": "state-OFED", "state": "ready"}]}
    if state == "ignore":
        status = {"state": "ignore", "reason": "Only instance with name nic-cluster-policy is supported"}
    return {
        "metadata": {"name": name},
        "spec": {
            "ofedDriver": {"image": "doca-driver"},
            "rdmaSharedDevicePlugin": {"config": json.dumps(config or RDMA_CONFIG)},
        },
        "status": status,
    }


def node_state(name, sync="Succeeded", error="", want=8, total=16, annotations=None):
    iface = {"pciAddress": "0000:1a:00.0", "name": "ens1f0np0"}
    return {
        "metadata": {"name": name, "namespace": SRIOV_NS, "annotations": dict(annotations or {})},
        "spec": {"interfaces": [{**iface, "numVfs": want}]},
        "status": {
            "syncStatus": sync,
            "lastSyncError": error,
            "interfaces": [{**iface, "numVfs": 0 if sync != "Succeeded" else want, "totalvfs": total}],
        },
    }


def pdb(name, allowed=0, ns="training"):
    return {
        "metadata": {"name": name, "namespace": ns},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2},
    }


DRAINING = {
    "sriovnetwork.openshift.io/desired-state": "Drain_Required",
    "sriovnetwork.openshift.io/current-state": "Draining",
}


def healthy_net_pods(on="n1", skip=()):
    return [net_pod(c, on) for c in (MOFED, RDMA_DP) if c not in skip]


def netcluster(nodes=None, net_pods=None, policies="ok", states=(), pdbs=(), cps=(), pods=()):
    data = raw(
        nodes=nodes if nodes is not None else [nic_node("n1")],
        pods=list(pods),
        cluster_policies=list(cps),
    )
    data.update(
        network_pods=healthy_net_pods() if net_pods is None else net_pods,
        nic_cluster_policies=[policy()] if policies == "ok" else policies,
        sriov_node_states=list(states),
        pdbs=list(pdbs),
    )
    return data


def view_of(data, facts=None, network=True):
    return _cluster_views.build_view(data, params(host_facts=facts, network=dict(NETWORK) if network else None))


def sb_facts(name, **over):
    base = {
        "kernel": {"release": "5.15.0-119-generic", "headers_installed": True},
        "secure_boot": {"state": "disabled"},
    }
    base.update(over)
    return {name: base}


CP_RDMA = [
    {
        **cluster_policy("cluster-policy", "2026-11-01T00:00:00Z", "notReady"),
        "spec": {"driver": {"rdma": {"enabled": True}}},
    }
]
PEERMEM_DRIVER = pod(
    "nvidia-driver-daemonset-g1",
    "nvidia-driver-daemonset",
    on="g1",
    ready=False,
    containers=[running("nvidia-driver-ctr"), running("nvidia-peermem-ctr", ready=False)],
    init_names=["k8s-driver-manager"],
    inits=[done("k8s-driver-manager")],
)
GPU_NIC_NODE = gpu_node(
    "g1", labels={**NIC, "network.nvidia.com/operator.mofed.wait": "false"}, alloc={"rdma/rdma_shared_ib": "63"}
)

# (case id, cluster objects, view kwargs, expected findings: (id, severity, object kind, object name, node, a fragment
#  of the cause))
CASES = [
    ("healthy", netcluster(states=[node_state("n1")]), {}, []),
    (
        "no-network-option/objects-ignored",
        netcluster(policies=[policy("my-policy", "ignore")], net_pods=[ofed_crash("n1", HEADERS_MSG)]),
        {"network": False},
        [],
    ),
    (
        "network-operator-not-installed",
        netcluster(nodes=[], net_pods=[], policies=None),
        {},
        [
            (
                "network-operator-not-installed",
                "info",
                "CustomResourceDefinition",
                "nicclusterpolicies.mellanox.com",
                None,
                "",
            )
        ],
    ),
    (
        "rdma/selector-matches-no-nic",
        netcluster(nodes=[nic_node("n1", rdma=None)]),
        {},
        [("rdma-resource-missing", "error", "Node", "n1", "n1", "selectors of rdma/rdma_shared_ib match no NIC")],
    ),
    (
        "rdma/selector-matches-no-nic-on-one-node",
        netcluster(
            nodes=[nic_node("n1", rdma=None), nic_node("n2")], net_pods=healthy_net_pods() + healthy_net_pods("n2")
        ),
        {},
        [("rdma-resource-missing", "warning", "Node", "n1", "n1", "match no NIC of the node")],
    ),
    (
        "rdma/plugin-not-running",
        netcluster(nodes=[nic_node("n1", rdma=None)], net_pods=healthy_net_pods(skip=(RDMA_DP,))),
        {},
        [("rdma-resource-missing", "error", "Node", "n1", "n1", "rdma-shared-dp-ds pod is not running")],
    ),
    (
        "ofed/crashloop-kernel-headers",
        netcluster(
            nodes=[nic_node("n1", rdma=None, wait="true")],
            net_pods=[ofed_crash("n1", HEADERS_MSG)],
            policies=[policy(state="notReady", applied=[{"name": "state-OFED", "state": "notReady"}])],
        ),
        {},
        [
            ("nicclusterpolicy-not-ready", "error", "NicClusterPolicy", "nic-cluster-policy", None, "state-OFED"),
            ("ofed-driver-crashloop", "error", "Pod", f"{MOFED}-n1", "n1", "kernel headers for the node's kernel"),
            ("rdma-resource-missing", "error", "Node", "n1", "n1", "OFED driver is not ready"),
        ],
    ),
    (
        "ofed/crashloop-secure-boot",
        netcluster(nodes=[nic_node("n1", wait="true")], net_pods=[ofed_crash("n1", SECURE_BOOT_MSG)]),
        {},
        [("ofed-driver-crashloop", "error", "Pod", f"{MOFED}-n1", "n1", "Secure Boot is enabled")],
    ),
    (
        "ofed/crashloop-secure-boot-from-host-facts",
        netcluster(nodes=[nic_node("n1", wait="true")], net_pods=[ofed_crash("n1", "exit status 1")]),
        {"facts": sb_facts("n1", secure_boot={"state": "enabled"})},
        [("ofed-driver-crashloop", "error", "Pod", f"{MOFED}-n1", "n1", "Secure Boot is enabled")],
    ),
    (
        "ofed/crashloop-unknown",
        netcluster(nodes=[nic_node("n1", wait="true")], net_pods=[ofed_crash("n1", "exit status 1")]),
        {},
        [("ofed-driver-crashloop", "error", "Pod", f"{MOFED}-n1", "n1", "exits repeatedly")],
    ),
    (
        "ofed/not-ready",
        netcluster(
            nodes=[nic_node("n1", wait="true")],
            net_pods=[net_pod(MOFED, "n1", ready=False, containers=[running("mofed-container", ready=False)])],
        ),
        {},
        [("ofed-driver-not-ready", "warning", "Pod", f"{MOFED}-n1", "n1", "device plugins and nvidia-peermem wait")],
    ),
    (
        "nicclusterpolicy/wrong-name",
        netcluster(
            nodes=[nic_node("n1", rdma=None, wait=None)], net_pods=[], policies=[policy("nic-policy", "ignore")]
        ),
        {},
        [("nicclusterpolicy-ignored", "error", "NicClusterPolicy", "nic-policy", None, "reconciles only")],
    ),
    (
        "nicclusterpolicy/extra-with-wrong-name",
        netcluster(policies=[policy(), policy("second", "ignore")]),
        {},
        [("nicclusterpolicy-ignored", "warning", "NicClusterPolicy", "second", None, "second is ignored")],
    ),
    (
        "nicclusterpolicy/not-reconciled",
        netcluster(policies=[policy(state=None)]),
        {},
        [("nicclusterpolicy-not-reconciled", "warning", "NicClusterPolicy", "nic-cluster-policy", None, "not running")],
    ),
    (
        "sriov/vfs-above-firmware-limit",
        netcluster(states=[node_state("n1", "Failed", "write sriov_numvfs: numerical result out of range", 32, 16)]),
        {},
        [("sriov-vfs-above-limit", "error", "SriovNetworkNodeState", "n1", "n1", "ens1f0np0 16")],
    ),
    (
        # v1.6.0 daemon mode: the refused count leaves the state InProgress with the error it had (none)
        "sriov/vfs-above-firmware-limit-in-progress",
        netcluster(states=[node_state("n1", "InProgress", "", 32, 16)]),
        {},
        [("sriov-vfs-above-limit", "error", "SriovNetworkNodeState", "n1", "n1", "ens1f0np0 16")],
    ),
    (
        "sriov/vfs-above-limit-from-message",
        netcluster(states=[node_state("n1", "Failed", "numVfs 32 exceeds totalvfs 16 of 0000:1a:00.0", 8, None)]),
        {},
        [("sriov-vfs-above-limit", "error", "SriovNetworkNodeState", "n1", "n1", "more VFs on n1")],
    ),
    (
        "sriov/sync-failed-other",
        netcluster(states=[node_state("n1", "Failed", "failed to set mtu")]),
        {},
        [("sriov-sync-failed", "error", "SriovNetworkNodeState", "n1", "n1", "failed to apply")],
    ),
    (
        "sriov/drain-blocked-by-pdb",
        netcluster(
            states=[node_state("n1", "InProgress", annotations=DRAINING)],
            pdbs=[pdb("trainer"), pdb("relaxed", allowed=1)],
        ),
        {},
        [
            (
                "sriov-drain-blocked",
                "error",
                "SriovNetworkNodeState",
                "n1",
                "n1",
                "training/trainer allows no disruption",
            )
        ],
    ),
    (
        "sriov/draining-no-pdb",
        netcluster(states=[node_state("n1", "InProgress", annotations=DRAINING)], pdbs=[pdb("relaxed", allowed=1)]),
        {},
        [("sriov-sync-in-progress", "warning", "SriovNetworkNodeState", "n1", "n1", "being drained")],
    ),
    (
        "peermem/not-loaded-ofed-ready",
        netcluster(
            nodes=[GPU_NIC_NODE], net_pods=healthy_net_pods("g1"), cps=CP_RDMA, pods=[operator_pod(), PEERMEM_DRIVER]
        ),
        {},
        [("peermem-not-loaded", "error", "Pod", "nvidia-driver-daemonset-g1", "g1", "modprobe nvidia-peermem failed")],
    ),
    (
        "peermem/not-loaded-ofed-crashloop",
        netcluster(
            nodes=[gpu_node("g1", labels={**NIC, "network.nvidia.com/operator.mofed.wait": "true"})],
            net_pods=[ofed_crash("g1", HEADERS_MSG), net_pod(RDMA_DP, "g1")],
            cps=CP_RDMA,
            pods=[operator_pod(), PEERMEM_DRIVER],
        ),
        {},
        [
            ("ofed-driver-crashloop", "error", "Pod", f"{MOFED}-g1", "g1", "kernel headers"),
            (
                "peermem-not-loaded",
                "error",
                "Pod",
                "nvidia-driver-daemonset-g1",
                "g1",
                "waits for the DOCA-OFED driver",
            ),
            ("rdma-resource-missing", "error", "Node", "g1", "g1", "OFED driver is not ready"),
        ],
    ),
    (
        "peermem/without-network-option",
        netcluster(nodes=[GPU_NIC_NODE], cps=CP_RDMA, pods=[operator_pod(), PEERMEM_DRIVER]),
        {"network": False},
        [("peermem-not-loaded", "error", "Pod", "nvidia-driver-daemonset-g1", "g1", "GPUDirect RDMA is asked for")],
    ),
    (
        "peermem/rdma-not-enabled",
        netcluster(
            nodes=[GPU_NIC_NODE],
            cps=[cluster_policy("cluster-policy", "2026-11-01T00:00:00Z", "notReady")],
            pods=[operator_pod(), PEERMEM_DRIVER],
        ),
        {},
        [],
    ),
]


@pytest.mark.parametrize("data, kwargs, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rules(data, kwargs, expected):
    findings = [f for f in _diagnosis.diagnose(view_of(data, **kwargs)) if f["id"] != "clusterpolicy-not-ready"]
    got = [(f["id"], f["severity"], f["object"]["kind"], f["object"]["name"], f["node"]) for f in findings]
    assert got == [e[:5] for e in expected], findings
    for f, e in zip(findings, expected, strict=True):
        assert e[5] in f["cause"], f
        assert f["fix"] and f["evidence"], f
        assert set(f) == {"id", "severity", "object", "node", "evidence", "cause", "fix"}
        if f["node"]:
            assert f["node"] in f["fix"] or f["node"] in " ".join(f["evidence"]) + f["cause"], f


def test_selector_evidence_lists_host_nics():
    nics = [{"address": "0000:1a:00.0", "vendor_id": "15b3", "device_id": "101b", "netdevs": ["ibp26s0"]}]
    view = view_of(netcluster(nodes=[nic_node("n1", rdma=None)]), facts={"n1": {"nics": nics}})
    (f,) = _diagnosis.diagnose(view)
    assert "host NICs: 0000:1a:00.0 15b3:101b ibp26s0" in f["evidence"][3]
    assert "deviceIDs=['1021']" in f["evidence"][1] and "listed in the evidence" in f["fix"]


def test_ofed_not_ready_gives_one_finding_per_node():
    config = {"configList": [*RDMA_CONFIG["configList"], {"resourceName": "rdma_roce", "rdmaHcaMax": 8}]}
    data = netcluster(
        nodes=[nic_node("n1", rdma=None, wait="true")],
        net_pods=[ofed_crash("n1", HEADERS_MSG)],
        policies=[policy(config=config)],
    )
    (f,) = [f for f in _diagnosis.diagnose(view_of(data)) if f["id"] == "rdma-resource-missing"]
    assert "rdma/rdma_shared_ib, rdma/rdma_roce absent" in f["evidence"][0] and "on n1" in f["fix"]


def test_headers_fix_names_the_kernel():
    view = view_of(netcluster(nodes=[nic_node("n1")], net_pods=[ofed_crash("n1", HEADERS_MSG)]), facts=sb_facts("n1"))
    (f,) = _diagnosis.diagnose(view)
    assert "linux-headers-5.15.0-119-generic" in f["fix"] and f["fix"].startswith("on n1")


def test_network_view_and_result():
    data = netcluster(
        nodes=[nic_node("n1"), node("cpu-0"), gpu_node("g1")],
        states=[node_state("n1")],
    )
    view = view_of(data)
    assert [n["name"] for n in view["network"]["nodes"]] == ["n1"]
    out = cs.result(view, [], api_requests=10)["network"]
    assert out["summary"] == {
        "nic_nodes": 1,
        "rdma_nodes": 1,
        "nic_cluster_policy": "ready",
        "sriov_states": 1,
        "sriov_states_succeeded": 1,
        "ofed_pods_ready": 1,
    }
    n1 = out["nodes"][0]
    assert n1["rdma"] == {"rdma/rdma_shared_ib": 63} and n1["mofed_wait"] == "false"
    assert n1["ofed"]["component"] == MOFED and n1["ofed"]["ready"] is True
    assert n1["sriov_state"]["interfaces"] == [
        {"name": "ens1f0np0", "pci_address": "0000:1a:00.0", "num_vfs_wanted": 8, "num_vfs": 8, "totalvfs": 16}
    ]
    assert out["nic_cluster_policies"]["active"] == "nic-cluster-policy"
    # without the option: no network key, as before
    assert "network" not in cs.result(view_of(data, network=False), [], api_requests=6)


def test_node_selector_applies_to_network_nodes():
    data = netcluster(nodes=[nic_node("n1"), nic_node("n2", labels={"pool": "infer"})])
    view = _cluster_views.build_view(data, params(network=dict(NETWORK)), _label_selectors.parse_selector("pool=infer"))
    assert [n["name"] for n in view["network"]["nodes"]] == ["n2"]


# -- collection: constant requests ------------------------------------------------------------------------
class NetReader:
    """Serves a raw dataset with the network side, one counted request per list, by kind."""

    def __init__(self, data):
        self.data = data
        self.requests = 0
        self.calls = []

    def _count(self, what, value):
        self.requests += 1
        self.calls.append(what)
        return value

    def nodes(self):
        return self._count("nodes", self.data["nodes"])

    def pods(self, namespace):
        key = {NS: "pods", NET: "network_pods"}.get(namespace, "amd_pods")
        return self._count(f"pods/{namespace}", self.data[key])

    def daemonsets(self, namespace):
        return self._count(f"daemonsets/{namespace}", self.data["daemonsets"])

    def cluster_custom(self, group, version, plural):
        key = {"clusterpolicies": "cluster_policies", "nicclusterpolicies": "nic_cluster_policies"}.get(plural, plural)
        return self._count(plural, self.data[key])

    def namespaced_custom(self, group, version, namespace, plural):
        key = "sriov_node_states" if plural == "sriovnetworknodestates" else "device_configs"
        return self._count(f"{plural}/{namespace}", self.data[key])


@pytest.mark.parametrize("count", [1, 10, 1000])
def test_requests_do_not_grow_with_nodes(count):
    names = [f"n{i}" for i in range(count)]
    data = netcluster(
        nodes=[nic_node(n) for n in names],
        net_pods=[p for n in names for p in healthy_net_pods(n)],
        states=[node_state(n) for n in names],
        pdbs=[pdb("trainer", allowed=1)],
    )
    data["poddisruptionbudgets"] = data.pop("pdbs")
    reader = NetReader(data)
    out = cs.gather(reader, params(network=dict(NETWORK)))
    assert out["api_requests"] == 10 == reader.requests
    assert out["network"]["summary"]["rdma_nodes"] == count
    assert out["network"]["summary"]["sriov_states_succeeded"] == count
    assert out["diagnosis"] == []


def test_network_in_the_operator_namespace_is_listed_once():
    reader = NetReader({**netcluster(), "poddisruptionbudgets": []})
    cs.collect(reader, NS, NS, {"namespace": NS, "sriov_namespace": NS})
    assert reader.requests == 8 and reader.calls.count(f"pods/{NS}") == 1


# -- through main() ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("check_mode", [True, False])
def test_module_network_option(monkeypatch, run_module, check_mode):
    from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s
    from ansible_collections.gpuops.platform.plugins.modules import gpu_cluster_status

    data = {**netcluster(nodes=[nic_node("n1", rdma=None)]), "poddisruptionbudgets": []}
    monkeypatch.setattr(_k8s, "new_api_client", lambda params: object())
    monkeypatch.setattr(_k8s, "Reader", lambda api_client: NetReader(data))
    result, failed = run_module(gpu_cluster_status, {"network": {}, "fail_on_error": True}, check_mode=check_mode)
    assert failed and result["changed"] is False and result["api_requests"] == 10
    assert result["network"]["namespace"] == NET and result["network"]["sriov_namespace"] == SRIOV_NS
    assert [f["id"] for f in result["diagnosis"]] == ["rdma-resource-missing"]
    assert "rdma-resource-missing on Node n1" in result["msg"]
    result, failed = run_module(gpu_cluster_status, {}, check_mode=check_mode)
    assert not failed and "network" not in result and result["api_requests"] == 6

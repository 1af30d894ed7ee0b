"""The network_operator role's filters: thin wrappers over _network (the rules are tested in
module_utils/test_network.py); here the variable names, the mode's resources and the shapes the role reads."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.network_host_findings import network_host_findings
from ansible_collections.gpuops.platform.plugins.filter.network_input_findings import network_input_findings
from ansible_collections.gpuops.platform.plugins.filter.network_operator_objects import network_operator_objects
from ansible_collections.gpuops.platform.plugins.module_utils.network import _network
from ansible_collections.gpuops.platform.plugins.module_utils.status import _network_ready

CX7 = {
    "address": "0000:1a:00.0",
    "vendor_id": "15b3",
    "device_id": "1021",
    "class": "020700",
    "driver": "mlx5_core",
    "model": "ConnectX-7",
    "netdevs": ["ibp26s0"],
    "netdev": "ibp26s0",
    "rdma_device": "mlx5_0",
    "link_layer": "InfiniBand",
}
INBOX = {"ofed": {"flavor": "inbox", "version": None, "raw": None}}
MOFED = {"ofed": {"flavor": "mlnx_ofed", "version": "24.10-1.1.4.0", "raw": "MLNX_OFED_LINUX-24.10-1.1.4.0:"}}
DRIVER = {"nvidia_driver": {"loaded": False, "version": None, "installed_version": None}}


def host(ofed=None, nics=(CX7,)):
    return {"nics": list(nics), **(ofed or INBOX), **DRIVER, "accelerators": [], "nvswitches": []}


def ids(findings):
    return sorted((f["id"], f["severity"]) for f in findings)


def test_input_findings_take_the_full_variable_names_and_ignore_the_roles_other_variables():
    assert network_input_findings({"network_operator_mode": "rdma_shared", "network_operator_state": "present"}) == []
    found = network_input_findings({"network_operator_mode": "roce", "network_operator_chart_version": "x"})
    assert [(f["id"], f["object"]["name"]) for f in found] == [("network-mode-unknown", "network_operator_mode")]


def test_host_findings_judge_the_modes_resources():
    bad = [{"name": "ib", "rdmaHcaMax": 8, "deviceIDs": ["101d"]}]
    variables = {"network_operator_rdma_shared_resources": bad, "network_operator_ofed_driver_enabled": False}
    assert ids(network_host_findings(variables, {"dgx-01": host()})) == [("network-selector-matches-no-nic", "error")]
    # host_device mode judges host_device_resources (default: vendor 15b3 with RDMA): the rdma list is not used
    variables["network_operator_mode"] = "host_device"
    assert network_host_findings(variables, {"dgx-01": host()}) == []
    # sriov mode: no device plugin in the policy, nothing to select
    variables["network_operator_mode"] = "sriov"
    assert network_host_findings(variables, {"dgx-01": host()}) == []


def test_an_unreachable_host_is_an_error_and_nothing_else_is_judged():
    bad = [{"name": "ib", "rdmaHcaMax": 8, "deviceIDs": ["101d"]}]
    variables = {"network_operator_rdma_shared_resources": bad, "network_operator_host_group": "gpu_nodes"}
    found = network_host_findings(variables, {"dgx-01": host()}, None, ["dgx-02"])
    assert ids(found) == [("network-host-unreachable", "error")]
    assert found[0]["object"] == {"kind": "host", "name": "dgx-02"}
    assert "remove it from the gpu_nodes group" in found[0]["fix"]
    # none unreachable: the hosts are judged as before
    assert ids(network_host_findings(variables, {"dgx-01": host()}, None, [])) == [
        ("network-selector-matches-no-nic", "error")
    ]


def test_host_findings_mofed_with_the_gpu_operators_intent():
    variables = {"network_operator_ofed_driver_enabled": True}
    assert ids(network_host_findings(variables, {"dgx-01": host(MOFED)})) == [("host-ofed-with-doca-driver", "error")]
    variables["network_operator_allow_host_mofed"] = True
    assert ids(network_host_findings(variables, {"dgx-01": host(MOFED)})) == [("host-ofed-with-doca-driver", "warning")]
    gpu = {"rdma": True, "use_host_mofed": True, "driver": "container"}
    found = network_host_findings({}, {"dgx-01": host()}, gpu)
    assert ids(found) == [("network-gpu-mofed-disagree", "error")]
    # an empty intent is "GPU Operator not managed"
    assert network_host_findings({}, {"dgx-01": host()}, {}) == []


def test_no_host_no_finding():
    bad = [{"name": "ib", "rdmaHcaMax": 8, "deviceIDs": ["101d"]}]
    assert network_host_findings({"network_operator_rdma_shared_resources": bad}, {}) == []


def test_objects():
    out = network_operator_objects(
        {
            "network_operator_nfd_managed": True,
            "network_operator_namespace": "net",
            "network_operator_ip_pools": [{"name": "pool", "subnet": "192.168.0.0/16", "perNodeBlockSize": 64}],
            "network_operator_macvlan_networks": [{"name": "roce", "master": "ens1f0np0", "ip_pool": "pool"}],
        }
    )
    assert out["chart_values"] == {"nfd": {"enabled": False}, "sriovNetworkOperator": {"enabled": False}}
    assert out["nic_cluster_policy"]["metadata"] == {"name": _network_ready.POLICY_NAME}
    assert out["nic_cluster_policy"] == _network.nic_cluster_policy({})
    owner = {"app.kubernetes.io/managed-by": "gpuops.platform", "gpuops.platform/role": "network_operator"}
    assert [(o["kind"], o["metadata"]) for o in out["ip_pools"]] == [
        ("IPPool", {"name": "pool", "namespace": "net", "labels": owner})
    ]
    assert [(o["kind"], o["metadata"]) for o in out["networks"]] == [
        ("MacvlanNetwork", {"name": "roce", "labels": owner})
    ]
    assert out["owner_selector"] == "app.kubernetes.io/managed-by=gpuops.platform,gpuops.platform/role=network_operator"
    assert out["waits"] == [{"kind": "MacvlanNetwork", "name": "roce"}]
    assert network_operator_objects({"network_operator_nfd_managed": False})["chart_values"]["nfd"] == {"enabled": True}


@pytest.mark.parametrize(
    "call",
    [
        lambda: network_input_findings([]),
        lambda: network_host_findings({}, []),
        lambda: network_operator_objects("x"),
    ],
)
def test_bad_input(call):
    with pytest.raises(AnsibleFilterError):
        call()

"""The sriov_network_operator role's filters: thin wrappers over _sriov_policy (its rules are tested in
module_utils/test_sriov_policy.py); here the variable names the role passes, the shapes it reads, the waits'
judgements (policies not yet written into a SriovNetworkNodeState, resources not advertised:
_cluster_wait.sriov_not_ready, behind gpu_cluster_status's wait) and the readiness row."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.sriov_host_findings import sriov_host_findings
from ansible_collections.gpuops.platform.plugins.filter.sriov_input_findings import sriov_input_findings
from ansible_collections.gpuops.platform.plugins.filter.sriov_network_operator_objects import (
    sriov_network_operator_objects,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_wait, _readiness, _sriov_ready

NS = "sriov-network-operator"
SEL = {"feature.node.kubernetes.io/pci-15b3.sriov.capable": "true"}
RAIL = {
    "name": "rail0",
    "resource_name": "rail0_ib",
    "node_selector": SEL,
    "num_vfs": 8,
    "nic_selector": {"vendor": "15b3", "pf_names": ["ibp20s0"]},
    "link_type": "ib",
    "is_rdma": True,
}


def variables(**changes):
    out = {
        "sriov_network_operator_source": "standalone",
        "sriov_network_operator_namespace": NS,
        "sriov_network_operator_config": {"config_daemon_node_selector": SEL},
        "sriov_network_operator_policies": [RAIL],
        "sriov_network_operator_networks": [],
        "sriov_network_operator_ib_networks": [
            {"name": "ib0", "resource_name": "rail0_ib", "network_namespace": "default"}
        ],
        "sriov_network_operator_values": {},
    }
    out.update({f"sriov_network_operator_{k}": v for k, v in changes.items()})
    return out


def test_objects_in_the_operators_namespace():
    built = sriov_network_operator_objects(variables())
    assert built["operator_config"]["metadata"] == {"name": "default", "namespace": NS}
    assert built["operator_config"]["spec"]["configDaemonNodeSelector"] == SEL
    assert [(p["kind"], p["metadata"]["namespace"], p["spec"]["numVfs"]) for p in built["policies"]] == [
        ("SriovNetworkNodePolicy", NS, 8)
    ]
    assert [(n["kind"], n["metadata"]["name"]) for n in built["networks"]] == [("SriovIBNetwork", "ib0")]
    assert built["chart_values"] == {"sriovOperatorConfig": {"deploy": False}}
    assert (built["prefix"], built["resources"]) == ("openshift.io", ["openshift.io/rail0_ib"])
    bundled = sriov_network_operator_objects(variables(source="network_operator"))
    assert bundled["resources"] == ["nvidia.com/rail0_ib"]


def test_objects_refuse_bad_input_and_non_dicts():
    with pytest.raises(AnsibleFilterError, match="resource"):
        sriov_network_operator_objects(variables(policies=[{**RAIL, "resource_name": "rail-0"}]))
    with pytest.raises(AnsibleFilterError):
        sriov_network_operator_objects(["not", "a", "dict"])


@pytest.mark.parametrize(
    ("changes", "bundled", "ids"),
    [
        ({}, False, []),
        # the IB network then names a resource no (valid) policy provides, or of the wrong link type: also reported
        (
            {"policies": [{**RAIL, "resource_name": "rail/0"}]},
            False,
            ["sriov-resource-name-invalid", "sriov-network-resource-unknown"],
        ),
        ({"policies": [{**RAIL, "num_vfs": -1}]}, False, ["sriov-num-vfs-invalid"]),
        ({"policies": [{**RAIL, "mtu": 0}]}, False, ["sriov-mtu-invalid"]),
        (
            {"policies": [{**RAIL, "link_type": "ethernet"}]},
            False,
            ["sriov-link-type-invalid", "sriov-network-link-type-mismatch"],
        ),
        ({"source": "both"}, False, ["sriov-source-invalid"]),
        ({}, True, ["sriov-operator-two-sources"]),  # standalone while the Network Operator bundles its copy
        ({"source": "network_operator"}, False, ["sriov-operator-source-off"]),
        ({"source": "network_operator"}, True, []),
        # the operator's webhooks need the chart's certificates (operator.admissionControllers.enabled)
        ({"config": {"enable_operator_webhook": True}}, False, ["sriov-webhook-without-certificates"]),
        (
            {"config": {"enable_injector": True, "enable_operator_webhook": True}},
            False,
            ["sriov-webhook-without-certificates", "sriov-webhook-without-certificates"],
        ),
        (
            {
                "config": {"enable_operator_webhook": True},
                "values": {"operator": {"admissionControllers": {"enabled": True}}},
            },
            False,
            [],
        ),
        (
            {
                "config": {"enable_operator_webhook": True},
                "values": {"operator": {"admissionControllers": {"enabled": "true"}}},
            },
            False,
            ["sriov-webhook-without-certificates"],
        ),
        ({"config": {"enable_operator_webhook": False}}, False, []),
        # the bundled copy's chart values are the Network Operator role's
        ({"source": "network_operator", "config": {"enable_operator_webhook": True}}, True, []),
    ],
)
def test_input_findings_name_the_rule(changes, bundled, ids):
    found = sriov_input_findings(variables(**changes), bundled)
    assert [f["id"] for f in found if f["severity"] == "error"] == ids
    for f in found:
        assert f["object"]["name"].startswith("sriov_network_operator_")  # the variable path


def test_host_findings_take_the_hosts_facts():
    nic = {
        "address": "0000:14:00.0",
        "vendor_id": "15b3",
        "device_id": "1021",
        "netdevs": ["ibp20s0"],
        "netdev": "ibp20s0",
        "link_layer": "InfiniBand",
        "sriov_totalvfs": 16,
    }
    facts, labels = {"dgx-0": {"nics": [nic]}}, {"dgx-0": SEL}
    assert sriov_host_findings(variables(), facts, labels, {"dgx-0": []}) == []
    over = sriov_host_findings(variables(policies=[{**RAIL, "num_vfs": 32}]), facts, labels)
    assert [f["id"] for f in over] == ["sriov-policy-vfs-above-limit"]
    assert sriov_host_findings(variables(), {}) == []
    # host_prep's VF request for the same PF: a second owner
    mine = sriov_host_findings(variables(), facts, labels, {"dgx-0": [{"pf": "ibp20s0", "num_vfs": 4}]})
    assert mine and all(f["severity"] == "error" for f in mine), mine
    with pytest.raises(AnsibleFilterError, match="as dicts"):
        sriov_host_findings(variables(), facts, ["not", "a", "dict"])


def state(name, *policies, sync="Succeeded"):
    groups = [{"resourceName": "rail0_ib", "vfRange": "0-7", "policyName": p} for p in policies]
    spec = {"interfaces": [{"pciAddress": "0000:14:00.0", "numVfs": 8, "vfGroups": groups}]} if groups else {}
    return {"metadata": {"name": name}, "spec": spec, "status": {"syncStatus": sync}}


class StatesReader:
    """The one list sriov_not_ready makes: the SriovNetworkNodeStates of the namespace."""

    def __init__(self, states):
        self.states, self.calls = states, []

    def objects(self, group, version, plural, namespace=None):
        self.calls.append((group, version, plural, namespace))
        return self.states


def not_ready(states=(), nodes=(), **variable_changes):
    """What the gpu_cluster_status wait still waits for, with the policies and prefix the role passes it
    (sriov_network_operator_objects)."""
    built = sriov_network_operator_objects(variables(**variable_changes))
    wait = {"sriov_policies": built["policies"], "sriov_namespace": NS, "sriov_resource_prefix": built["prefix"]}
    reader = StatesReader(list(states))
    out = _cluster_wait.sriov_not_ready(reader, {"nodes": list(nodes)}, {"operator_namespace": "x"}, wait)
    assert reader.calls == [("sriovnetwork.openshift.io", "v1", "sriovnetworknodestates", NS)]
    return out


@pytest.mark.parametrize(
    ("states", "waiting"),
    [
        ([], ["rail0"]),
        ([state("dgx-0")], ["rail0"]),  # the operator has not written the policy yet
        ([state("dgx-0", "rail0")], []),
        ([state("dgx-0"), state("dgx-1", sync="Failed")], []),  # a failed state ends the wait: the state wait names it
    ],
)
def test_wait_for_the_policies_in_the_states(states, waiting):
    out = not_ready(states)
    assert [n.name for n in out if n.kind == "SriovNetworkNodePolicy"] == waiting


def node(name, labels, allocatable):
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}


def test_wait_for_the_resources_on_the_selected_nodes():
    applied = [state("dgx-0", "rail0")]
    nodes = [node("dgx-0", SEL, {"openshift.io/rail0_ib": "8"}), node("cpu-0", {}, {})]
    assert not_ready(applied, nodes) == []
    missing = not_ready(applied, [node("dgx-1", SEL, {})])
    assert len(missing) == 1 and missing[0].kind == "Node" and missing[0].name == "dgx-1"
    assert missing[0].condition.startswith("allocatable openshift.io/rail0_ib is absent")


def test_no_policies_no_request():
    reader = StatesReader([])
    assert _cluster_wait.sriov_not_ready(reader, {"nodes": []}, {"operator_namespace": "x"}, {}) == []
    assert reader.calls == []


def test_the_wait_option_knows_the_node_state():
    kind = _readiness.KINDS["SriovNetworkNodeState"]
    assert (kind.group, kind.version, kind.plural, kind.namespaced) == (
        "sriovnetwork.openshift.io",
        "v1",
        "sriovnetworknodestates",
        True,
    )
    assert kind.ready is _sriov_ready.sriov_network_node_state
    failed = {"status": {"syncStatus": "Failed", "lastSyncError": "PF ibp20s0: sriov_totalvfs is 16"}}
    assert "lastSyncError: PF ibp20s0" in _readiness.KINDS["SriovNetworkNodeState"].ready(failed)


def removed_state(name, *policies, vfs=8, external=False, pf="ibp20s0"):
    """A state after the policies were deleted: `policies` still in its spec or not, `vfs` VFs on the PF."""
    out = state(name, *policies)
    iface = {"pciAddress": "0000:14:00.0", "name": pf, "vendor": "15b3", "deviceID": "1021", "numVfs": vfs}
    if external:
        iface["externallyManaged"] = True
    out["status"]["interfaces"] = [iface]
    return out


def removal_not_ready(states, nodes):
    built = sriov_network_operator_objects(variables())
    wait = {"sriov_policies_removed": built["policies"], "sriov_namespace": NS}
    reader = StatesReader(list(states))
    out = _cluster_wait.sriov_not_ready(reader, {"nodes": list(nodes)}, {"operator_namespace": "x"}, wait)
    assert reader.calls == [("sriovnetwork.openshift.io", "v1", "sriovnetworknodestates", NS)]
    return [(n.kind, n.name, n.condition) for n in out]


@pytest.mark.parametrize(
    ("states", "labels", "waiting"),
    [
        # the operator has not applied the deletion yet: the spec still names the policy
        ([removed_state("dgx-0", "rail0")], SEL, [("SriovNetworkNodePolicy", "rail0", "deleted, still written")]),
        # applied, the config daemon has not reset the PF yet
        ([removed_state("dgx-0")], SEL, [("SriovNetworkNodeState", "dgx-0", "PF ibp20s0 (0000:14:00.0) still has 8")]),
        ([removed_state("dgx-0", vfs=0)], SEL, []),  # reset
        ([removed_state("dgx-0", external=True)], SEL, []),  # host_prep's VFs stay
        ([removed_state("dgx-0", pf="ibp36s0")], SEL, []),  # a PF the policy did not select
        ([removed_state("dgx-0")], {}, []),  # a node the policy did not select
    ],
)
def test_wait_for_deleted_policies_to_be_undone(states, labels, waiting):
    out = removal_not_ready(states, [node("dgx-0", labels, {})])
    assert [(k, n) for k, n, _c in out] == [(k, n) for k, n, _c in waiting]
    assert all(c.startswith(w) for (_k, _n, c), (_k2, _n2, w) in zip(out, waiting, strict=True))

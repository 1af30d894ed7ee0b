"""gpu_cluster_status's network side against the real control plane: one in-process Network Operator simulator
instance (and a GPU Operator one for GPUDirect RDMA) of this module reconciles a NicClusterPolicy over five
dgx-h100 nodes with injected faults; the module, run through `ansible`, names each fault's cause, the node and the
fix, with the same number of API requests as on an empty cluster.

Faults, one per node: n0 `ofed-crashloop-headers`, n1 `ofed-crashloop-secureboot`, n2 `peermem-not-loaded`
(ClusterPolicy driver.rdma.enabled), n3 VFs above the firmware limit, n4 a drain blocked by a PodDisruptionBudget;
every node: an rdmaSharedDevicePlugin entry whose deviceID matches no NIC; and a second NicClusterPolicy with the
wrong name. n3 and n4 go through the lab's real SR-IOV Network Operator v1.6.0: a SriovOperatorConfig `default`
selecting them and two SriovNetworkNodePolicies (32 VFs on n3's ibp20s0, whose firmware allows 16; 8 then 4 VFs on
n4's) that the operator renders into their SriovNetworkNodeStates; this module's SriovNetworkNodeState simulator
instance plays their config daemons (hack/gpuops_lab/simulator/handlers/sriov.py): n3's refuses the count as
upstream's does, n4 (fault `sriov-drain-blocked`) asks for a drain before changing VFs in use, and the operator's
real drain controller cannot evict the pod of n4's VFs that a PodDisruptionBudget guards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from gpuops_lab import sriov
from gpuops_lab.k8s import ensure_crd, wait_for
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".state" / "collections"))

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_status  # noqa: E402

CHARTS = REPO / "tests/fixtures/charts"
CRDS = [
    CHARTS / "gpu-operator/v26.7.0/crds/nvidia.com_clusterpolicies.yaml",
    CHARTS / "network-operator/26.4.1/crds/mellanox.com_nicclusterpolicies.yaml",
]
FAULTS = {
    0: "ofed-crashloop-headers",
    1: "ofed-crashloop-secureboot",
    2: "peermem-not-loaded",
    4: "sriov-drain-blocked",
}
SRIOV_NS = "sriov-network-operator"  # the lab's real operator reconciles this namespace only
RDMA_CONFIG = {
    "configList": [
        {"resourceName": "rdma_shared_ib", "rdmaHcaMax": 63, "selectors": {"vendors": ["15b3"], "deviceIDs": ["1021"]}},
        # a wrong deviceID (ConnectX-6 Dx): the plugin runs and advertises nothing for it
        {"resourceName": "rdma_roce", "rdmaHcaMax": 63, "selectors": {"vendors": ["15b3"], "deviceIDs": ["101d"]}},
    ]
}
SRIOV_API = ("sriovnetwork.openshift.io", "v1")
RAIL_LABEL = "gpuops.test/sriov-rail"


def _policy(tag, rail, num_vfs):
    """A SriovNetworkNodePolicy on the nodes labelled for `rail`: VFs of the PF ibp20s0 (ConnectX-7, totalvfs 16)."""
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": f"{tag}-{rail}", "namespace": SRIOV_NS},
        "spec": {
            "resourceName": f"{tag}_{rail}",
            "nodeSelector": {RAIL_LABEL: f"{tag}-{rail}"},
            "numVfs": num_vfs,
            "nicSelector": {"vendor": "15b3", "deviceID": "1021", "pfNames": ["ibp20s0"]},
            "deviceType": "netdevice",
            "isRdma": True,
            "linkType": "ib",
            "priority": 10,
        },
    }


def _crs(cluster):
    return client.CustomObjectsApi(cluster.api_client)


@pytest.fixture(scope="module")
def fabric(cluster):
    """Namespaces, five dgx-h100 nodes of this module's simulator instance, the two simulators, the policies, the
    node states and a PodDisruptionBudget; everything removed afterwards."""
    from gpuops_lab import nodes
    from gpuops_lab.simulator.faults import FAULTS_ANNOTATION
    from gpuops_lab.simulator.framework import RealClient, Simulator
    from gpuops_lab.simulator.handlers.network import NicClusterPolicyHandler
    from gpuops_lab.simulator.handlers.nvidia import INSTANCE_LABEL, ClusterPolicyHandler
    from gpuops_lab.simulator.handlers.sriov import SriovNetworkNodeStateHandler

    core = client.CoreV1Api(cluster.api_client)
    custom = _crs(cluster)
    tag = f"t{uuid.uuid4().hex[:6]}"
    gpu_ns, net_ns = f"{tag}-gpu", f"{tag}-net"
    for ns in (gpu_ns, net_ns):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        cluster.lab.wait_namespace_sa(ns)
    for crd in CRDS:
        ensure_crd(cluster.api_client, crd)
    sriov.ensure_prereqs(cluster.api_client, cfg=cluster.cfg)  # a molecule uninstall before may have removed the CRDs
    assert not _crs(cluster).list_namespaced_custom_object(*SRIOV_API, SRIOV_NS, "sriovoperatorconfigs")["items"], (
        f"a SriovOperatorConfig already exists in {SRIOV_NS}: this module creates its own `default`"
    )
    names = nodes.add(core, "dgx-h100", 5, prefix=f"{tag}-dgx")
    sim = None
    policies = []
    sriov_objs = []
    try:
        assert wait_for(lambda: all(nodes.labelled(core.read_node(n)) for n in names), 90), "nfd-master labels"
        for i, name in enumerate(names):
            meta = {"labels": {INSTANCE_LABEL: tag}, "annotations": {FAULTS_ANNOTATION: FAULTS.get(i, "")}}
            if i != 2:  # only n2 runs the GPU operands (peermem); the others keep the test small
                meta["labels"]["nvidia.com/gpu.deploy.operands"] = "false"
            if i in (3, 4):
                meta["labels"][RAIL_LABEL] = f"{tag}-{'ab'[i - 3]}"
            core.patch_node(name, {"metadata": meta})
        handlers = [
            NicClusterPolicyHandler(instance=tag, operator_namespace=net_ns),
            ClusterPolicyHandler(instance=tag, operator_namespace=gpu_ns),
            SriovNetworkNodeStateHandler(instance=tag),
        ]
        sim = Simulator(RealClient.from_kubeconfig(cluster.kubeconfig), handlers, resync_period=2.0, watch_timeout=30)
        sim.start()
        assert sim.wait_ready(30), "simulator watches not established within 30s"
        labels = {INSTANCE_LABEL: tag}
        off = {"enabled": False}
        cp = {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": f"{tag}-cp", "labels": labels},
            "spec": {
                "daemonsets": {},
                "operator": {},
                "driver": {"enabled": True, "rdma": {"enabled": True}},
                **{k: off for k in ("toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager")},
                "nodeStatusExporter": off,
            },
        }
        custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", cp)
        policies.append(("nvidia.com", "v1", "clusterpolicies", cp["metadata"]["name"]))
        spec = {
            "ofedDriver": {"image": "doca-driver", "repository": "nvcr.io/nvidia/mellanox", "version": "25.10-1.2.8.0"},
            "rdmaSharedDevicePlugin": {"image": "k8s-rdma-shared-dev-plugin", "config": json.dumps(RDMA_CONFIG)},
        }
        for name in ("nic-cluster-policy", f"{tag}-nic-policy"):
            body = {
                "apiVersion": "mellanox.com/v1alpha1",
                "kind": "NicClusterPolicy",
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
            }
            custom.create_cluster_custom_object("mellanox.com", "v1alpha1", "nicclusterpolicies", body)
            policies.append(("mellanox.com", "v1alpha1", "nicclusterpolicies", name))
        # n3: 32 VFs asked on a PF whose firmware allows 16; n4: 8 VFs, then 4 once a pod guarded by a
        # PodDisruptionBudget that allows no disruption uses one of them (VFs in use change: a drain first)
        sriov_objs.append(("sriovoperatorconfigs", "default"))
        custom.create_namespaced_custom_object(
            *SRIOV_API,
            SRIOV_NS,
            "sriovoperatorconfigs",
            {
                "apiVersion": "sriovnetwork.openshift.io/v1",
                "kind": "SriovOperatorConfig",
                "metadata": {"name": "default", "namespace": SRIOV_NS},
                "spec": {"configDaemonNodeSelector": {INSTANCE_LABEL: tag}, "logLevel": 2},
            },
        )
        for rail, num_vfs in (("a", 32), ("b", 8)):
            sriov_objs.append(("sriovnetworknodepolicies", f"{tag}-{rail}"))
            custom.create_namespaced_custom_object(
                *SRIOV_API, SRIOV_NS, "sriovnetworknodepolicies", _policy(tag, rail, num_vfs)
            )
        resource = f"openshift.io/{tag}_b"
        assert wait_for(lambda: core.read_node(names[4]).status.allocatable.get(resource) == "8", 60), (
            f"{resource}: 8 VFs on {names[4]} (0 -> 8 needs no drain)"
        )
        trainer = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer-0", "labels": {"app": "trainer"}},
            "spec": {
                "nodeName": names[4],
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.invalid/trainer:1",
                        "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}},
                    }
                ],
                "tolerations": [{"operator": "Exists"}],
            },
        }
        core.create_namespaced_pod(net_ns, trainer)
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "trainer"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "trainer"}}},
        }
        policy_api = client.PolicyV1Api(cluster.api_client)
        policy_api.create_namespaced_pod_disruption_budget(net_ns, pdb)

        def guarded():
            st = policy_api.read_namespaced_pod_disruption_budget("trainer", net_ns).status
            return st is not None and st.expected_pods == 1 and st.disruptions_allowed == 0

        assert wait_for(guarded, 30), "the PodDisruptionBudget guards the running trainer"
        custom.patch_namespaced_custom_object(
            *SRIOV_API, SRIOV_NS, "sriovnetworknodepolicies", f"{tag}-b", {"spec": {"numVfs": 4}}
        )
        yield {"nodes": names, "gpu_ns": gpu_ns, "net_ns": net_ns, "tag": tag, "label": INSTANCE_LABEL}
    finally:
        policy_api = client.PolicyV1Api(cluster.api_client)
        for delete in (
            lambda: policy_api.delete_namespaced_pod_disruption_budget("trainer", net_ns),
            lambda: core.delete_namespaced_pod("trainer-0", net_ns, grace_period_seconds=0),
            *(
                (
                    lambda plural=plural, name=name: custom.delete_namespaced_custom_object(
                        *SRIOV_API, SRIOV_NS, plural, name
                    )
                )
                for plural, name in reversed(sriov_objs)
            ),
        ):
            try:
                delete()
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
        # the operator deletes the node states with its SriovOperatorConfig
        wait_for(
            lambda: not custom.list_namespaced_custom_object(*SRIOV_API, SRIOV_NS, "sriovnetworknodestates")["items"],
            30,
        )
        for group, version, plural, name in policies:
            try:
                custom.delete_cluster_custom_object(group, version, plural, name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
        apps = client.AppsV1Api(cluster.api_client)
        wait_for(lambda: not any(apps.list_namespaced_daemon_set(ns).items for ns in (gpu_ns, net_ns)), 30)
        if sim is not None:
            sim.stop()
        nodes.remove(core, names)
        for ns in (gpu_ns, net_ns):
            core.delete_namespace(ns)


def _params(fabric):
    return {
        "operator_namespace": fabric["gpu_ns"],
        "amd_namespace": fabric["gpu_ns"],
        "node_selector": f"{fabric['label']}={fabric['tag']}",
        "network": {"namespace": fabric["net_ns"], "sriov_namespace": SRIOV_NS},
    }


def _run_module(cluster, args: dict) -> tuple[int, dict]:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_HOME": str(REPO / ".state" / "ansible-home"),
    }
    argv = [
        str(Path(sys.executable).parent / "ansible"),
        "localhost",
        "-m",
        "gpuops.platform.gpu_cluster_status",
        "-a",
        json.dumps({"kubeconfig": cluster.kubeconfig, **args}),
        "-e",
        f"ansible_python_interpreter={sys.executable}",
    ]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=300, check=False)
    assert r.stdout.strip(), r.stderr
    return r.returncode, json.loads(r.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture(scope="module")
def diagnosed(cluster, fabric):
    """The module's result once every injected fault shows (the simulators settle in a few seconds)."""
    n = fabric["nodes"]
    expected = {
        ("ofed-driver-crashloop", n[0]),
        ("ofed-driver-crashloop", n[1]),
        ("peermem-not-loaded", n[2]),
        ("rdma-resource-missing", n[2]),
        ("sriov-vfs-above-limit", n[3]),
        ("sriov-drain-blocked", n[4]),
        ("nicclusterpolicy-ignored", None),
    }
    params = {**_params(fabric), "host_facts": None}
    params["network"] = dict(params["network"])
    last = {}

    def look():
        reader = _k8s.Reader(_k8s.new_api_client({"kubeconfig": cluster.kubeconfig}))
        last["res"] = res = _cluster_status.gather(reader, params)
        return expected <= {(f["id"], f["node"]) for f in res["diagnosis"]}

    assert wait_for(look, 60, 1.0), [(f["id"], f["node"]) for f in last["res"]["diagnosis"]]
    rc, res = _run_module(cluster, _params(fabric))
    assert rc == 0 and res["changed"] is False, res
    return res


def _one(res, fid, node):
    found = [f for f in res["diagnosis"] if f["id"] == fid and f["node"] == node]
    assert len(found) == 1, [(f["id"], f["node"]) for f in res["diagnosis"]]
    return found[0]


def test_ofed_crashloop_names_headers_and_secure_boot(fabric, diagnosed):
    n0, n1 = fabric["nodes"][:2]
    headers = _one(diagnosed, "ofed-driver-crashloop", n0)
    assert headers["object"]["name"].startswith("mofed-ubuntu") and headers["object"]["namespace"] == fabric["net_ns"]
    assert "kernel headers" in headers["cause"] and headers["fix"].startswith(f"on {n0}:")
    assert "install linux-headers-" in headers["fix"]
    secure = _one(diagnosed, "ofed-driver-crashloop", n1)
    assert "Secure Boot is enabled" in secure["cause"] and "mokutil" in secure["fix"] and n1 in secure["fix"]
    node = next(x for x in diagnosed["network"]["nodes"] if x["name"] == n0)
    assert node["mofed_wait"] == "true" and node["ofed"]["state"] == "CrashLoopBackOff" and node["rdma"] == {}


def test_rdma_selector_matching_no_nic(fabric, diagnosed):
    n2 = fabric["nodes"][2]
    f = _one(diagnosed, "rdma-resource-missing", n2)
    assert (
        f["severity"] == "error" and "rdma/rdma_roce" in f["evidence"][0] and "deviceIDs=['101d']" in f["evidence"][1]
    )
    assert "match no NIC of the node" in f["cause"] and n2 in f["fix"]
    node = next(x for x in diagnosed["network"]["nodes"] if x["name"] == n2)
    assert node["rdma"] == {"rdma/rdma_shared_ib": 63}  # the right entry is advertised
    # where the OFED driver crash-loops, the cause is the driver, not the selector
    n0 = fabric["nodes"][0]
    assert "OFED driver is not ready" in _one(diagnosed, "rdma-resource-missing", n0)["cause"]


def test_peermem_not_loaded(fabric, diagnosed):
    n2 = fabric["nodes"][2]
    f = _one(diagnosed, "peermem-not-loaded", n2)
    assert f["object"]["namespace"] == fabric["gpu_ns"] and f["object"]["name"].startswith("nvidia-driver-daemonset")
    assert "nvidia-peermem-ctr" in f["evidence"][0] and "driver.rdma.enabled=true" in f["evidence"][1]
    assert "GPUDirect RDMA" in f["cause"] and "useHostMofed" in f["fix"]


def test_sriov_vfs_above_limit(fabric, diagnosed):
    n3 = fabric["nodes"][3]
    limit = _one(diagnosed, "sriov-vfs-above-limit", n3)
    assert limit["object"] == {"kind": "SriovNetworkNodeState", "namespace": SRIOV_NS, "name": n3}
    # the operator rendered the policy's 32 VFs into the spec; the config daemon refused them (InProgress, v1.6.0)
    assert limit["evidence"][0] == "syncStatus InProgress, lastSyncError: empty"
    assert "ibp20s0 16" in limit["cause"] and n3 in limit["cause"] and "numVfs 32 requested" in limit["evidence"][1]
    assert "mlxconfig" in limit["fix"]


def test_sriov_drain_blocked(fabric, diagnosed):
    n4 = fabric["nodes"][4]
    drain = _one(diagnosed, "sriov-drain-blocked", n4)
    # the operator's drain controller took the daemon's request, cordoned the node and cannot evict the trainer
    assert drain["evidence"][:2] == [
        "syncStatus InProgress, drain desired-state Drain_Required, current-state Draining",
        f"node {n4} is cordoned",
    ]
    assert f"{fabric['net_ns']}/trainer allows no disruption" in drain["cause"] and n4 in drain["cause"]
    assert f"{fabric['net_ns']}/trainer" in drain["fix"] and n4 in drain["fix"]
    node = next(x for x in diagnosed["network"]["nodes"] if x["name"] == n4)
    assert node["sriov"] == {f"openshift.io/{fabric['tag']}_b": 8}  # the VFs stay until the drain completes


def test_wrong_policy_name_and_constant_requests(cluster, fabric, diagnosed):
    f = _one(diagnosed, "nicclusterpolicy-ignored", None)
    assert f["object"] == {"kind": "NicClusterPolicy", "namespace": None, "name": f"{fabric['tag']}-nic-policy"}
    assert "only the NicClusterPolicy named nic-cluster-policy" in f["cause"]
    assert "create the policy as nic-cluster-policy" in f["fix"]
    policies = {p["name"]: p for p in diagnosed["network"]["nic_cluster_policies"]["objects"]}
    assert policies[f"{fabric['tag']}-nic-policy"]["state"] == "ignore"
    assert policies["nic-cluster-policy"]["state"] == "notReady"
    # the same requests as on a cluster of no node: five lists (operator_namespace is amd_namespace) plus four for
    # the network
    assert diagnosed["api_requests"] == 9
    rc, empty = _run_module(cluster, {**_params(fabric), "node_selector": "gpuops.test/none=x"})
    assert rc == 0 and empty["network"]["nodes"] == [] and empty["api_requests"] == 9

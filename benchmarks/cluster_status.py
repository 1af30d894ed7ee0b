"""Benchmark of gpu_cluster_status's gathering (issue: constant list calls whatever the node count): adds 10,
then 100, then 1000 simulated dgx-h100 nodes, and at each size runs the status gathering (the module's code path:
list calls + view + diagnosis, then one look of the `wait` judgement) `--runs` times, recording the median wall
time, the API requests and the size of the node list. Target (reported, not asserted): 1000 nodes within 1.5x
the time of 10 nodes, same requests.

With `--network` (issue 8) the module's `network` option is on and the network objects are present on every bench
node, written as the operators would: the node label network.nvidia.com/operator.mofed.wait=false and
`rdma/rdma_shared_ib` allocatable (RDMA shared device plugin), one SriovNetworkNodeState per node with
syncStatus Succeeded (SR-IOV config daemon), a `mofed-ubuntu22.04-ds` DaemonSet whose pods kwok runs on every
dgx-h100 node (DOCA driver), a ready NicClusterPolicy `nic-cluster-policy` (labelled for another simulator
instance, so the lab's simulator leaves it alone) and a PodDisruptionBudget. The request count must be the same
at every size (asserted: the run fails otherwise).

Usage: PYTHONPATH=hack .venv/bin/python benchmarks/cluster_status.py [--sizes 10,100,1000] [--runs 15] [--network]
Writes benchmarks/results/cluster_status-<UTC date>.json (cluster_status_network-<UTC date>.json with --network)
and prints it. The lab must be up (make up); the bench nodes (bench-cs-*) and network objects are removed
afterwards."""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import platform
import statistics
import sys
import time

from gpuops_lab import nodes, sriov
from gpuops_lab.config import REPO, LabConfig
from gpuops_lab.k8s import ensure_crd, wait_for
from kubernetes import client

sys.path.insert(0, str(REPO / ".state" / "collections"))

from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import (
    _cluster_status,
    _cluster_views,
    _cluster_wait,
    _diagnosis,
)

PARAMS = {"operator_namespace": "gpu-operator", "amd_namespace": "kube-amd-gpu", "host_facts": None}
# what the gpu_operator role's wait judges at each look: its ClusterPolicy and every GPU node
WAIT_TARGETS = _cluster_wait.wait_targets({"objects": [{"kind": "ClusterPolicy", "name": "cluster-policy"}]}, PARAMS)
NET_NS = "bench-network"
NETWORK = {"namespace": NET_NS, "sriov_namespace": NET_NS}
CHARTS = REPO / "tests/fixtures/charts"
# the NicClusterPolicy CRD (fixture) and the SriovNetworkNodeState CRD of upstream's SR-IOV chart (the lab's build
# cache, gpuops_lab.sriov.chart_dir)
NET_CRDS = [CHARTS / "network-operator/26.4.1/crds/mellanox.com_nicclusterpolicies.yaml"]
SNNS_CRD = "crds/sriovnetwork.openshift.io_sriovnetworknodestates.yaml"
BENCH_INSTANCE = {"sim.gpuops.io/instance": "bench-cs"}
SNNS = ("sriovnetwork.openshift.io", "v1", NET_NS, "sriovnetworknodestates")
NETWORK_FINDINGS = ("ofed-", "rdma-", "sriov-", "nicclusterpolicy-", "network-", "peermem-")


class Network:
    """The network objects of the bench (see the module docstring), added per node as the bench grows."""

    def __init__(self, api) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.api = api
        self.done: set[str] = set()

    def _gone(self) -> bool:
        return not [n for n in self.core.list_namespace().items if n.metadata.name == NET_NS]

    def setup(self) -> None:
        wait_for(self._gone, 120, 1.0)  # a namespace left Terminating by an earlier run
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NET_NS)))
        for crd in [*NET_CRDS, sriov.chart_dir() / SNNS_CRD]:
            ensure_crd(self.api, crd)
        policy = {
            "apiVersion": "mellanox.com/v1alpha1",
            "kind": "NicClusterPolicy",
            "metadata": {"name": "nic-cluster-policy", "labels": BENCH_INSTANCE},
            "spec": {
                "ofedDriver": {"image": "doca-driver", "repository": "nvcr.io/nvidia/mellanox", "version": "25.10"},
                "rdmaSharedDevicePlugin": {
                    "image": "k8s-rdma-shared-dev-plugin",
                    "repository": "nvcr.io/nvidia/mellanox",
                    "version": "network-operator-v26.4.1",
                    "config": "{}",
                },
            },
        }
        self.custom.create_cluster_custom_object("mellanox.com", "v1alpha1", "nicclusterpolicies", policy)
        applied = [{"name": "state-OFED", "state": "ready"}, {"name": "state-RDMA-device-plugin", "state": "ready"}]
        self.custom.patch_cluster_custom_object_status(
            "mellanox.com",
            "v1alpha1",
            "nicclusterpolicies",
            "nic-cluster-policy",
            {"status": {"state": "ready", "appliedStates": applied}},
        )
        ds = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "mofed-ubuntu22.04-ds"},
            "spec": {
                "selector": {"matchLabels": {"app": "mofed-ubuntu22.04"}},
                "template": {
                    "metadata": {"labels": {"app": "mofed-ubuntu22.04"}},
                    "spec": {
                        "nodeSelector": {"gpuops.io/hardware-profile": "dgx-h100"},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{"name": "mofed-container", "image": "registry.invalid/doca-driver:1"}],
                    },
                },
            },
        }
        client.AppsV1Api(self.api).create_namespaced_daemon_set(NET_NS, ds)
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "mofed"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "mofed-ubuntu22.04"}}},
        }
        client.PolicyV1Api(self.api).create_namespaced_pod_disruption_budget(NET_NS, pdb)

    def _node(self, name: str) -> None:
        rdma = {"rdma/rdma_shared_ib": "63"}
        self.core.patch_node(name, {"metadata": {"labels": {"network.nvidia.com/operator.mofed.wait": "false"}}})
        self.core.patch_node_status(name, {"status": {"capacity": rdma, "allocatable": rdma}})
        pf = {"pciAddress": "0000:14:00.0", "name": "ibp20s0"}
        body = {
            "apiVersion": "sriovnetwork.openshift.io/v1",
            "kind": "SriovNetworkNodeState",
            "metadata": {"name": name},
            "spec": {"interfaces": [{**pf, "numVfs": 8}]},
        }
        self.custom.create_namespaced_custom_object(*SNNS[:3], SNNS[3], body)
        status = {"syncStatus": "Succeeded", "interfaces": [{**pf, "numVfs": 8, "totalvfs": 16}]}
        self.custom.patch_namespaced_custom_object_status(*SNNS[:3], SNNS[3], name, {"status": status})

    def add(self, names: list[str]) -> None:
        todo = [n for n in names if n not in self.done]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(self._node, todo))
        self.done |= set(todo)

    def ofed_ready(self, count: int) -> bool:
        ds = client.AppsV1Api(self.api).read_namespaced_daemon_set_status("mofed-ubuntu22.04-ds", NET_NS)
        return (ds.status.number_ready or 0) >= count

    def teardown(self) -> None:
        for call in (
            lambda: self.custom.delete_cluster_custom_object(
                "mellanox.com", "v1alpha1", "nicclusterpolicies", "nic-cluster-policy"
            ),
            lambda: self.core.delete_namespace(NET_NS),
        ):
            try:
                call()
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def measure(api_client, runs: int) -> dict[str, object]:
    total, listing, judging, requests = [], [], [], set()
    for _run in range(runs):
        reader = _k8s.Reader(api_client)
        t0 = time.perf_counter()
        raw = _cluster_status.collect(
            reader, PARAMS["operator_namespace"], PARAMS["amd_namespace"], PARAMS.get("network")
        )
        t1 = time.perf_counter()
        view = _cluster_views.build_view(raw, PARAMS)
        result = _cluster_status.result(view, _diagnosis.diagnose(view), reader.requests)
        t2 = time.perf_counter()
        _cluster_wait.not_ready(reader, raw, view, PARAMS, WAIT_TARGETS)  # one look of the wait, no request
        judging.append(time.perf_counter() - t2)
        total.append(t2 - t0)
        listing.append(t1 - t0)
        requests.add(result["api_requests"])
    network = {}
    if "network" in result:
        summary = result["network"]["summary"]
        network = {
            "network_nodes": len(result["network"]["nodes"]),
            "rdma_nodes": summary["rdma_nodes"],
            "sriov_states_succeeded": summary["sriov_states_succeeded"],
            "ofed_pods_ready": summary["ofed_pods_ready"],
            "nic_cluster_policy": summary["nic_cluster_policy"],
            "network_findings": sum(1 for f in result["diagnosis"] if f["id"].startswith(NETWORK_FINDINGS)),
        }
    return {
        **network,
        "nodes_total": result["summary"]["nodes_total"],
        "gpu_nodes": result["summary"]["gpu_nodes"],
        "findings": len(result["diagnosis"]),
        "api_requests": sorted(requests),
        "median_s": round(statistics.median(total), 4),
        "min_s": round(min(total), 4),
        "max_s": round(max(total), 4),
        "median_list_calls_s": round(statistics.median(listing), 4),
        "median_view_and_diagnosis_s": round(statistics.median(total) - statistics.median(listing), 4),
        "median_wait_judgement_s": round(statistics.median(judging), 5),
        "node_list_bytes": len(json.dumps(raw["nodes"])),
    }


def _all_ready(core, names: list[str]) -> bool:
    got = {
        n.metadata.name
        for n in core.list_node(label_selector="gpuops.io/hardware-profile=dgx-h100").items
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    }
    return set(names) <= got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--settle", type=float, default=15.0, help="seconds to wait after the nodes are Ready")
    ap.add_argument("--network", action="store_true", help="the network option on, the network objects present")
    args = ap.parse_args()
    if args.network:
        PARAMS["network"] = dict(NETWORK)
    sizes = [int(s) for s in args.sizes.split(",")]
    cfg = LabConfig.load()
    core = nodes.api(cfg)
    api_client = _k8s.new_api_client({"kubeconfig": str(cfg.kubeconfig)})
    out: dict[str, object] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "versions": cfg.versions,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs_per_size": args.runs,
        "settle_s": args.settle,
        "other_nodes_in_cluster": len(core.list_node().items),
        "network": args.network,
    }
    network = Network(nodes.api(cfg).api_client) if args.network else None
    made: list[str] = []
    results: dict[str, object] = {}
    try:
        if network is not None:
            network.setup()
        for size in sizes:
            t0 = time.monotonic()
            made += nodes.add(core, "dgx-h100", size - len(made), prefix="bench-cs")
            ok = wait_for(functools.partial(_all_ready, core, list(made)), 600, 1.0)
            if network is not None:
                network.add(made)
                ok = ok and wait_for(functools.partial(network.ofed_ready, len(made)), 600, 2.0)
            time.sleep(args.settle)  # let kwok's node initialisation burst pass (it shares the CPUs)
            results[str(size)] = {
                "ready": ok,
                "add_s": round(time.monotonic() - t0, 1),
                **measure(api_client, args.runs),
            }
            print(f"{size} bench nodes: {results[str(size)]}", file=sys.stderr)
    finally:
        nodes.remove(core, made)
        if network is not None:
            network.teardown()
    out["sizes"] = results
    small, large = results.get(str(min(sizes))), results.get(str(max(sizes)))
    if small and large:
        out["ratio_largest_vs_smallest"] = round(large["median_s"] / small["median_s"], 2)
        out["target"] = {
            "largest_within_1_5x_of_smallest": large["median_s"] <= 1.5 * small["median_s"],
            "same_requests": small["api_requests"] == large["api_requests"],
        }
    name = "cluster_status_network" if args.network else "cluster_status"
    res = REPO / "benchmarks" / "results" / f"{name}-{time.strftime('%Y%m%d', time.gmtime())}.json"
    res.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    counts = {tuple(r["api_requests"]) for r in results.values()}
    if len(counts) != 1 or len(next(iter(counts))) != 1:
        raise SystemExit(f"the request count differs between sizes or runs: {sorted(counts)}")


if __name__ == "__main__":
    main()

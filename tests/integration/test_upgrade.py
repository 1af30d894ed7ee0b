"""playbooks/upgrade.yml against the lab (issue 12): the GPU Operator from v26.3.1 to v26.7.0 with its driver bump
(580.126.20 -> 595.91.07). The plan refuses an incompatible driver before any change; --check changes nothing; the
real run upgrades the release (CRDs first, values verified by the role) and follows the simulated upgrade controller
(hack/gpuops_lab/simulator/handlers/driver_upgrade.py, upstream's state machine) node by node: never more than
maxParallelUpgrades nodes in progress (a watch on the nodes sees every state label change), GPU pods deleted before
a node's driver is replaced, every node back to schedulable. A node whose new driver keeps failing stops the run,
named, with the way back; once it is fixed, a second run finishes the job."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from kubernetes import client, watch
from test_gpu_operator_role import KWOK, REPO, _env, cluster_policy, play, releases

STATE = "nvidia.com/gpu-driver-upgrade-state"
NOT_IN_PROGRESS = ("", "upgrade-required", "upgrade-done")
UPGRADE = REPO / "playbooks/upgrade.yml"


@pytest.fixture
def env(cluster, tmp_path):
    e = _env(
        cluster,
        tmp_path,
        # the lab's nodes carry NFD's labels; no NFD release here, and the GPU Operator's bundled one stays off
        gpuops_nfd_managed=False,
        gpu_operator_nfd_enabled=False,
        gpu_operator_driver_upgrade_policy={"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "50%"},
        gpuops_upgrade_timeout=240,
    )
    yield e
    if releases(e["ns"]) or cluster_policy(cluster.api_client) is not None:
        play(e["inv"], e["pb"], "-e", json.dumps({"gpu_operator_state": "absent"}))


class Watcher(threading.Thread):
    """Watches the nodes (every update, from a resourceVersion: no state can slip between two reads): the most nodes
    in progress at once, and the states each node went through."""

    def __init__(self, core):
        super().__init__(daemon=True)
        self.core, self.stop, self.peak, self.seen = core, threading.Event(), 0, {}

    def run(self):
        listed = self.core.list_node()
        states = {n.metadata.name: (n.metadata.labels or {}).get(STATE, "") for n in listed.items}
        rv = listed.metadata.resource_version
        while not self.stop.is_set():
            for event in watch.Watch().stream(self.core.list_node, resource_version=rv, timeout_seconds=2):
                node = event["object"]
                rv = node.metadata.resource_version
                if event["type"] == "DELETED":
                    states.pop(node.metadata.name, None)
                    continue
                state = (node.metadata.labels or {}).get(STATE, "")
                states[node.metadata.name] = state
                seen = self.seen.setdefault(node.metadata.name, [])
                if state and (not seen or seen[-1] != state):
                    seen.append(state)
                self.peak = max(self.peak, sum(1 for s in states.values() if s not in NOT_IN_PROGRESS))


def driver_images(core, ns) -> dict[str, str]:
    pods = core.list_namespaced_pod(ns, label_selector="app=nvidia-driver-daemonset").items
    return {p.spec.node_name: p.spec.containers[0].image for p in pods if not p.metadata.deletion_timestamp}


def test_upgrade_node_by_node_stops_on_a_failed_node_and_a_rerun_finishes(env, cluster, core, add_nodes, namespace):
    api = cluster.api_client
    dgx = add_nodes("dgx-h100", 1)[0]
    bad = add_nodes("pcie-l40s", 1)[0]

    r = play(env["inv"], env["pb"], "-e", json.dumps({"gpu_operator_chart_version": "v26.3.1"}))
    assert r.returncode == 0, r.stdout[-4000:]
    assert cluster_policy(api)["spec"]["driver"]["version"] == "580.126.20"
    deadline = time.monotonic() + 60  # the controller labels every in-sync driver node upgrade-done
    while time.monotonic() < deadline and (core.read_node(dgx).metadata.labels or {}).get(STATE) != "upgrade-done":
        time.sleep(1)
    assert core.read_node(dgx).metadata.labels.get(STATE) == "upgrade-done"

    # a driver the target release does not list: refused by the plan, nothing changed
    r = play(
        env["inv"],
        UPGRADE,
        "-e",
        json.dumps({"gpu_operator_chart_version": "v26.7.0", "gpu_operator_driver_version": "580.126.20"}),
    )
    out = re.sub(r"\s+", " ", r.stdout)
    assert r.returncode != 0 and "[upgrade-driver-unsupported]" in out and "Nothing was changed" in out, out[-3000:]
    assert "helm rollback" in out  # the way back is printed before the first change

    # --check changes nothing
    r = play(env["inv"], UPGRADE, "--check", "-e", json.dumps({"gpu_operator_chart_version": "v26.7.0"}))
    assert r.returncode == 0, r.stdout[-4000:]
    assert cluster_policy(api)["spec"]["driver"]["version"] == "580.126.20"
    assert core.read_node(dgx).metadata.labels.get(STATE) == "upgrade-done"

    # a GPU workload on the dgx node (deleted before its driver is replaced), a new driver that fails on the L40S
    core.create_namespaced_pod(
        namespace,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="trainer"),
            spec=client.V1PodSpec(
                node_name=dgx,
                tolerations=[client.V1Toleration(**t) for t in KWOK],
                containers=[
                    client.V1Container(
                        name="main",
                        image="registry.invalid/cuda:12",
                        resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}),
                    )
                ],
            ),
        ),
    )
    core.patch_node(bad, {"metadata": {"annotations": {"sim.gpuops.io/faults": "driver-upgrade-fail"}}})
    watcher = Watcher(core)
    watcher.start()
    try:
        r = play(env["inv"], UPGRADE, "-e", json.dumps({"gpu_operator_chart_version": "v26.7.0"}))
        out = re.sub(r"\s+", " ", r.stdout)
        assert r.returncode != 0, out[-3000:]
        assert f"[driver-upgrade-failed] Node {bad}" in out and "helm rollback" in out, out[-3000:]
        assert "Running upgrade.yml again goes on from here" in out
        assert cluster_policy(api)["spec"]["driver"]["version"] == "595.91.07"
        assert core.read_node(bad).metadata.labels.get(STATE) == "upgrade-failed"
        assert core.read_node(bad).spec.unschedulable  # left cordoned
        # the failed node holds the only slot (maxParallelUpgrades 1): every other driver node is either done (it came
        # before, by name) or still waiting - none in progress
        others = {
            n.metadata.name: (n.metadata.labels or {}).get(STATE)
            for n in core.list_node().items
            if (n.metadata.labels or {}).get("nvidia.com/gpu.deploy.driver") == "true" and n.metadata.name != bad
        }
        assert set(others.values()) <= {"upgrade-done", "upgrade-required"}, others

        # fixed: the second run goes on from there and finishes
        core.patch_node(bad, {"metadata": {"annotations": {"sim.gpuops.io/faults": None}}})
        r = play(env["inv"], UPGRADE, "-e", json.dumps({"gpu_operator_chart_version": "v26.7.0"}))
        assert r.returncode == 0, r.stdout[-4000:]
    finally:
        watcher.stop.set()
        watcher.join()
    assert watcher.peak <= 1, watcher.seen  # maxParallelUpgrades 1 (a failed node holds its slot)
    # the dgx node went cordon -> ... -> done, its GPU pod deleted before its driver was replaced
    assert watcher.seen[dgx][-4:] == [
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
        "upgrade-done",
    ], watcher.seen[dgx]
    assert "cordon-required" in watcher.seen[dgx] and "pod-deletion-required" in watcher.seen[dgx]
    assert "trainer" not in [p.metadata.name for p in core.list_namespaced_pod(namespace).items]
    nodes = {n.metadata.name: n for n in core.list_node().items}
    driver_nodes = [
        n for n, o in nodes.items() if (o.metadata.labels or {}).get("nvidia.com/gpu.deploy.driver") == "true"
    ]
    assert {nodes[n].metadata.labels.get(STATE) for n in driver_nodes} == {"upgrade-done"}
    assert not any(nodes[n].spec.unschedulable for n in driver_nodes)
    images = driver_images(core, env["ns"])
    assert all("595.91.07" in images[n] for n in driver_nodes), images

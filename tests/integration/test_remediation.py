"""playbooks/remediate.yml on the lab (the real API server, its PodDisruptionBudget controller and the Eviction API;
kwok runs the pods), with the event the gpu_health rulebook sends for an XID 79 (GPUXidFallenOffBus) on one GPU of a
simulated DGX H100 node:

- dry run: nothing changes but Events - an API snapshot (gpuops_lab.testing.snapshot) is the same before and after,
  the node stays schedulable, the workload's pods stay - and the plan (cordon, the pods the drain would evict, the
  repair step) is printed and recorded as a GpuopsRemediationPlanned Event on the node;
- act: the node is cordoned, labelled and annotated (alert, fault class, GPU UUID and PCI bus id, the time, by
  gpuops) and a GpuopsQuarantined Event is on it; the drain evicts the workload's pods within their budget
  (minAvailable 2 of 3: one pod goes, the other is held until a replacement is ready elsewhere, the run fails naming
  the budget and the node stays quarantined); the rerun (the same event) changes nothing of the quarantine, evicts
  the held pod and hands the node to break-fix (no host-prep connection in this inventory, no reboot allowed);
- resolved: the node is re-validated (ready, no GPU operand of it not ready, its own smoke test) - a pod holding its
  GPUs leaves the smoke pod unscheduled, the test fails and the node stays quarantined; once the GPUs are free the smoke
  pod is bound to the cordoned node, and the node is returned (uncordoned, gpuops' marks gone, the kwok taint kept);
- a storm: an XID 79 on 40 % of a 64-node fleet (26 nodes) at once, the breaker's limits as a user gets them (the
  defaults): exactly the limit quarantined, the rest refused with the breaker's message, the breaker open (TRIPPED),
  nothing else changed (API snapshot: only the quarantined nodes and the breaker's ConfigMap; Events on the nodes);
- the repair ladder on the node's simulated host (uncorrectable ECC error): an idle GPU reset with nvidia-smi -r -i 3
  after its index, UUID and PCI bus id are checked; a GPU with a process on it not reset, the node to break-fix;
- a CPU node and a node that does not exist: refused, nothing changed (API snapshot).

Each test keeps the breaker's state in its own namespace (gpuops_remediation_namespace)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from gpuops_lab.k8s import wait_for
from gpuops_lab.testing import node_events, snapshot
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".state" / "collections"))

from ansible_collections.gpuops.platform.plugins.module_utils.remediation import _policy  # noqa: E402

KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
LABEL = "gpuops.platform/remediation"
A = "gpuops.platform/remediation."
SMOKE = "gpuops.platform/smoke.cuda.nvidia-h100-80gb-hbm3"


def event(node: str, status: str = "firing", **over) -> dict:
    ev = {
        "node": node,
        "alert": "GPUXidFallenOffBus",
        "fault_class": "bus",
        "action": "quarantine",
        "severity": "critical",
        "gpu": {"uuid": "GPU-5c6f1a2b-0000-1111-2222-333344445555", "pci_bus_id": "00000000:17:00.0", "index": 3},
        "starts_at": "2026-11-28T08:00:00Z",
        "fingerprint": f"fp{uuid.uuid5(uuid.NAMESPACE_DNS, node).hex[:14]}",
        "labels": {"Hostname": node, "gpu": "3", "err_code": "79"},
        "annotations": {"summary": "XID 79"},
        "status": status,
    }
    ev.update(over)
    return ev


def remediate(cluster, tmp: Path, ev: dict, background: bool = False, gpu_hosts: dict | None = None, **extra):
    """ansible-playbook playbooks/remediate.yml with the event, on an inventory of the lab's controller and, in
    gpu_nodes, the simulated GPU hosts given (named like their nodes)."""
    inv = tmp / f"inv-{uuid.uuid4().hex[:6]}.yml"
    controller = {
        "ansible_connection": "local",
        "ansible_python_interpreter": str(REPO / ".venv/bin/python"),
        "gpuops_kubeconfig": cluster.kubeconfig,
    }
    groups = {"cluster_controller": {"hosts": {"localhost": controller}}, "gpu_nodes": {"hosts": gpu_hosts or {}}}
    inv.write_text(yaml.safe_dump({"all": {"children": groups}}))
    extra_file = tmp / f"extra-{uuid.uuid4().hex[:6]}.json"
    extra_file.write_text(json.dumps({"gpuops_remediation_event": ev, **extra}))
    argv = ["ansible-playbook", "playbooks/remediate.yml", "-i", str(inv), "-e", f"@{extra_file}"]
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    if background:
        return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, check=False)


def pod(name: str, node: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "train"}, "annotations": {"sim.gpuops.io/run-until-deleted": "1"}},
        "spec": {
            "nodeName": node,
            "tolerations": KWOK,
            "containers": [{"name": "c", "image": "registry.example/train:1"}],
        },
    }


def changed_objects(cluster, core, before: dict) -> dict:
    """The objects of the API snapshot that differ from ``before`` ({key: (before, after)}), but for the objects of
    namespaces an earlier test left terminating (the namespace controller removes them on its own schedule)."""
    # remediate.yml deletes no namespace: one terminating now, or gone since (an earlier test's, removed by the
    # namespace controller during the run), is not the run's change
    spaces = core.list_namespace().items
    going = {n.metadata.name for n in spaces if n.metadata.deletion_timestamp is not None}
    here = {n.metadata.name for n in spaces} - going
    after = snapshot(cluster.api_client)
    keys = {
        k
        for k in before.keys() | after.keys()
        if (k[1] in here if k[1] else not (k[0] == "v1/Namespace" and k[2] not in here))
    }
    return {k: (before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)}


def same_snapshot(cluster, core, before: dict) -> bool:
    """The API snapshot equals ``before`` (changed_objects); fails naming the objects that changed."""
    changed = changed_objects(cluster, core, before)
    assert changed == {}, f"objects changed: {sorted(changed)}"
    return True


def advertise(core, node: str) -> None:
    """What the device plugin does on a healthy node: its GPUs in the node's capacity and allocatable."""
    status = core.read_node_status(node).status
    gpus = {"nvidia.com/gpu": "8"}
    body = {"status": {"capacity": {**status.capacity, **gpus}, "allocatable": {**status.allocatable, **gpus}}}
    core.patch_node_status(node, body)
    assert wait_for(lambda: (core.read_node(node).status.allocatable or {}).get("nvidia.com/gpu") == "8", 30)
    core.patch_node(node, {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}})  # GFD's


def hog(name: str, node: str) -> dict:
    """A pod bound to the node by name (past its cordon, as a pod with spec.nodeName is) holding its 8 GPUs."""
    out = pod(name, node)
    out["metadata"]["labels"] = {"app": "hog"}
    out["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}
    return out


def running(core, namespace: str, names: list[str]) -> bool:
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
    return all(n in pods and pods[n].status.phase == "Running" for n in names)


@pytest.fixture
def breaker_ns(namespace):
    return {"gpuops_remediation_namespace": namespace}


@pytest.fixture
def smoke_ns(core, namespace):
    """The smoke tests' namespace of the test (the role creates it), removed after it."""
    name = f"{namespace}-smoke"[:63]
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException as e:
        if e.status != 404:
            raise


def test_xid79_dry_run_then_act_then_return(cluster, core, namespace, add_nodes, breaker_ns, smoke_ns, tmp_path):
    node, other = add_nodes("dgx-h100", 2)
    policy = client.PolicyV1Api(cluster.api_client)
    for name, where in (("train-0", node), ("train-1", node), ("train-2", other)):
        core.create_namespaced_pod(namespace, pod(name, where))
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}},
        },
    )

    def allowed(n: int):
        return lambda: (
            (policy.read_namespaced_pod_disruption_budget("train", namespace).status.disruptions_allowed or 0) == n
        )

    assert wait_for(lambda: running(core, namespace, ["train-0", "train-1", "train-2"]), 60)
    assert wait_for(allowed(1), 60), "the PodDisruptionBudget never allowed one disruption"
    ev = event(node)
    # the re-validation's smoke tests: their pods tolerate the lab's kwok taint too, and give up on a pod after 10 s
    smoke = {
        "gpuops_remediation_mode": "act",
        "smoke_tests_tolerations": KWOK,
        "smoke_tests_timeout": 10,
        "smoke_tests_namespace": smoke_ns,
    }

    # dry run: only Events
    before = snapshot(cluster.api_client)
    r = remediate(cluster, tmp_path, ev, **breaker_ns)
    assert r.returncode == 0, r.stdout[-4000:]
    assert same_snapshot(cluster, core, before)
    assert not core.read_node(node).spec.unschedulable
    assert running(core, namespace, ["train-0", "train-1", "train-2"])
    assert "would: cordon" in r.stdout and f"{namespace}/train-0" in r.stdout and "evict" in r.stdout
    planned = node_events(core, node)["GpuopsRemediationPlanned"]
    assert any("dry run" in m and "cordon" in m for m in planned)
    assert any("would evict or wait for" in m and f"{namespace}/train-1" in m for m in planned)

    # act: quarantined; the budget lets one pod go and holds the other until the drain's timeout
    r = remediate(
        cluster, tmp_path, ev, gpuops_remediation_mode="act", gpuops_remediation_drain={"timeout": 15}, **breaker_ns
    )
    assert r.returncode != 0, r.stdout[-4000:]
    assert "did not finish within 15 s" in r.stdout and f"PodDisruptionBudget {namespace}/train" in r.stdout
    n = core.read_node(node)
    assert n.spec.unschedulable is True
    assert n.metadata.labels[LABEL] == "quarantined"
    ann = n.metadata.annotations
    assert ann[A + "alert"] == "GPUXidFallenOffBus" and ann[A + "fault-class"] == "bus"
    assert ann[A + "gpu-uuid"] == ev["gpu"]["uuid"] and ann[A + "gpu-pci-bus-id"] == "00000000:17:00.0"
    assert ann[A + "by"] == "gpuops" and ann[A + "at"] and ann[A + "cordoned"] == "true"
    assert any("GPUXidFallenOffBus" in m for m in node_events(core, node)["GpuopsQuarantined"])
    left = [p.metadata.name for p in core.list_namespaced_pod(namespace).items if p.spec.node_name == node]
    assert len(left) == 1, left  # minAvailable 2 of 3: exactly one evicted
    assert wait_for(allowed(0), 30)

    # a replacement elsewhere: the same event again evicts the held pod and, with no host to reset, hands to break-fix
    core.create_namespaced_pod(namespace, pod("train-3", other))
    assert wait_for(allowed(1), 60)
    marks = dict(core.read_node(node).metadata.annotations)
    r = remediate(
        cluster, tmp_path, ev, gpuops_remediation_mode="act", gpuops_remediation_drain={"timeout": 60}, **breaker_ns
    )
    assert r.returncode == 0, r.stdout[-4000:]
    assert not [p for p in core.list_namespaced_pod(namespace).items if p.spec.node_name == node]
    n = core.read_node(node)
    assert n.metadata.labels[LABEL] == "break-fix" and n.spec.unschedulable is True
    assert {k: v for k, v in n.metadata.annotations.items() if k != A + "break-fix"} == marks
    assert len(node_events(core, node)["GpuopsQuarantined"]) == 1  # the repeated event recorded no second one
    assert "GpuopsBreakFix" in node_events(core, node) and "GpuopsDrained" in node_events(core, node)

    # resolved: without its GPUs advertised the node fails its re-validation and stays quarantined
    r = remediate(cluster, tmp_path, event(node, status="resolved"), gpuops_remediation_mode="act", **breaker_ns)
    assert r.returncode != 0 and "failed its re-validation" in r.stdout and "gpu-resource-missing" in r.stdout
    assert core.read_node(node).spec.unschedulable is True
    # the device plugin advertises the GPUs again (what the simulated GPU Operator does), but a pod bound to the node
    # past the cordon holds all 8: the node's smoke test cannot be scheduled, it fails and the node stays quarantined
    advertise(core, node)
    core.create_namespaced_pod(namespace, hog("hog", node))
    assert wait_for(lambda: running(core, namespace, ["hog"]), 60)
    r = remediate(cluster, tmp_path, event(node, status="resolved"), **smoke, **breaker_ns)
    assert r.returncode != 0, r.stdout[-4000:]
    assert "failed its re-validation" in r.stdout and "stays quarantined: its smoke tests did not pass" in r.stdout
    assert "smoke test(s) failed: cuda.nvidia-h100-80gb-hbm3 on " + node in r.stdout
    assert "not scheduled" in r.stdout and "Insufficient nvidia.com/gpu" in r.stdout
    n = core.read_node(node)
    assert n.spec.unschedulable is True and n.metadata.labels[LABEL] == "break-fix"
    assert n.metadata.labels[SMOKE] == "fail"
    assert "GpuopsReturned" not in node_events(core, node)
    # the GPUs free again: the smoke pod runs on the cordoned node (it tolerates the cordon), re-validated, returned
    core.delete_namespaced_pod("hog", namespace, grace_period_seconds=0)
    assert wait_for(lambda: "hog" not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items}, 60)
    r = remediate(cluster, tmp_path, event(node, status="resolved"), **smoke, **breaker_ns)
    assert r.returncode == 0, r.stdout[-4000:]
    n = core.read_node(node)
    assert n.metadata.labels[SMOKE] == "not-measured"  # kwok runs nothing in the pod: bound, nothing measured
    record = json.loads(n.metadata.annotations[SMOKE])
    assert [(p["node"], p["requests"]) for p in record["pods"]] == [(node, {"nvidia.com/gpu": "1"})], record
    assert not n.spec.unschedulable
    assert LABEL not in (n.metadata.labels or {})
    assert not [k for k in n.metadata.annotations or {} if k.startswith(A)]
    assert [t.key for t in n.spec.taints or []] == ["kwok.x-k8s.io/node"]
    assert "GpuopsReturned" in node_events(core, node)
    cm = core.read_namespaced_config_map("gpuops-remediation-breaker", namespace)
    assert json.loads(cm.data["active"]) == {} and cm.data["status"] == "CLOSED"


FLEET = 64  # GPU nodes
STORM = 26  # 40 % of them faulted at once
POOL = 4  # remediation runs at a time (the rulebook runs one at a time, under its lock; a few here to race the breaker)


def test_a_storm_trips_the_breaker(cluster, core, namespace, add_nodes, breaker_ns, tmp_path):
    """An XID 79 on 40 % of a 64-node fleet at once, remediate.yml in act mode with the breaker's defaults (no
    gpuops_remediation_breaker: _policy.DEFAULT_BREAKER), the runs in a pool of POOL: exactly the breaker's limit is
    quarantined, every other node refused naming the breaker, and nothing else changed."""
    fleet = add_nodes("dgx-h100", FLEET, settled=True)  # the snapshot below must not count the lab's own writes
    storm = fleet[:: len(fleet) // STORM][:STORM]
    assert len(storm) == STORM
    # the limit as the module computes it, over the lab's GPU nodes (64 here and any an earlier test left)
    listed = json.loads(core.list_node(_preload_content=False).data)["items"]
    gpu_nodes = sum(1 for n in listed if _policy.is_gpu_node(n))
    limit = _policy.node_limit(_policy.DEFAULT_BREAKER, gpu_nodes)
    assert limit is not None and 0 < limit < STORM, (limit, gpu_nodes)
    before = snapshot(cluster.api_client)
    t0 = time.monotonic()
    with ThreadPoolExecutor(POOL) as pool:
        runs = list(
            pool.map(
                lambda n: remediate(
                    cluster,
                    tmp_path,
                    event(n),
                    gpuops_remediation_mode="act",
                    gpuops_remediation_repair=False,
                    **breaker_ns,
                ),
                storm,
            )
        )
    print(f"storm: {STORM} remediation runs, {POOL} at a time, in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    outputs = {n: (r.returncode, r.stdout) for n, r in zip(storm, runs, strict=True)}
    quarantined = sorted(n for n in fleet if (core.read_node(n).metadata.labels or {}).get(LABEL))
    refused = sorted(n for n, (rc, out) in outputs.items() if rc != 0 and "circuit breaker" in out)
    assert len(quarantined) == limit, {n: o[-1500:] for n, (_rc, o) in outputs.items()}
    assert set(quarantined) <= set(storm)
    assert refused == sorted(set(storm) - set(quarantined)), {n: o[-1500:] for n, (_rc, o) in outputs.items()}
    assert all(outputs[n][0] == 0 for n in quarantined), {n: outputs[n][1][-3000:] for n in quarantined}
    for n in quarantined:
        node = core.read_node(n)
        assert node.spec.unschedulable is True and node.metadata.labels[LABEL] == "quarantined"
        assert "GpuopsQuarantined" in node_events(core, n)
    for n in refused:
        assert "A person decides" in outputs[n][1], outputs[n][1][-3000:]
        assert "GpuopsCircuitBreakerOpen" in node_events(core, n)
    # the first refusal names the limit; the breaker is open from then on
    assert any(f"the limit is {limit}" in outputs[n][1] for n in refused), [outputs[n][1][-1500:] for n in refused]
    cm = core.read_namespaced_config_map("gpuops-remediation-breaker", namespace)
    assert cm.data["status"] == "TRIPPED" and sorted(json.loads(cm.data["active"])) == quarantined
    # nothing else changed: the refused and the healthy nodes are as they were, every other object too
    changed = changed_objects(cluster, core, before)
    expected = {("v1/Node", "", n) for n in quarantined} | {("v1/ConfigMap", namespace, "gpuops-remediation-breaker")}
    assert set(changed) == expected, sorted(set(changed) ^ expected)


@pytest.mark.parametrize("kind", ["cpu", "unknown"])
def test_cpu_and_unknown_nodes_are_refused(cluster, core, add_nodes, breaker_ns, tmp_path, kind):
    node = add_nodes("cpu-only", 1)[0] if kind == "cpu" else f"ghost-{uuid.uuid4().hex[:6]}"
    before = snapshot(cluster.api_client)
    r = remediate(cluster, tmp_path, event(node), gpuops_remediation_mode="act", **breaker_ns)
    assert r.returncode != 0
    assert ("is not a GPU node of this platform" if kind == "cpu" else "does not exist in the cluster") in r.stdout
    assert "nothing was changed" in r.stdout
    assert same_snapshot(cluster, core, before)
    if kind == "cpu":
        assert not core.read_node(node).spec.unschedulable


def host_gpus(wrapper: str) -> dict[int, tuple[str, str]]:
    """What nvidia-smi answers inside the simulated host: {index: (UUID, PCI bus id)}."""
    code = (
        "import subprocess; print(subprocess.run(['nvidia-smi', '--query-gpu=index,uuid,pci.bus_id',"
        " '--format=csv,noheader'], capture_output=True, text=True, check=True).stdout)"
    )
    out = subprocess.run([wrapper, "-c", code], capture_output=True, text=True, check=True).stdout
    rows = [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]
    return {int(i): (u, b) for i, u, b in rows}


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_the_gpu_is_reset_on_the_node_host_when_idle(cluster, core, add_nodes, breaker_ns, tmp_path, busy):
    """The repair ladder's first step through the host-prep connection (a simulated DGX H100 host named like its node,
    in gpu_nodes), for an uncorrectable ECC error: an idle GPU is reset with nvidia-smi -r -i 3 after its index, UUID
    and PCI bus id are checked against the event's, and the node waits quarantined for the fault to clear; a GPU with
    a process on it is not reset and the node goes to break-fix (no reboot allowed)."""
    from gpuops_lab.hostsim.hosts import create_host

    node = add_nodes("dgx-h100", 1)[0]
    made = create_host("dgx-h100", node, tmp_path / "hosts")
    tree = Path(made["hostvars"]["gpuops_hostsim_tree"])
    uuid3, bus3 = host_gpus(made["python"])[3]
    if busy:
        (tree / "run/gpuops-sim/gpu-processes").mkdir(parents=True, exist_ok=True)
        (tree / "run/gpuops-sim/gpu-processes/3").write_text("4242, python3\n")
    # an uncorrectable ECC error (class memory: reset, reboot, break-fix); a GPU fallen off the bus skips the reset
    ev = event(
        node,
        alert="GPUUncorrectableECCError",
        fault_class="memory",
        gpu={"uuid": uuid3, "pci_bus_id": bus3, "index": 3},
        labels={"Hostname": node, "gpu": "3", "UUID": uuid3},
    )
    r = remediate(
        cluster, tmp_path, ev, gpu_hosts={node: made["hostvars"]}, gpuops_remediation_mode="act", **breaker_ns
    )
    resets = tree / "run/gpuops-sim/gpu-resets.log"
    n = core.read_node(node)
    assert n.spec.unschedulable, r.stdout[-3000:]
    if busy:
        assert not resets.exists() or not resets.read_text().strip(), resets.read_text()
        assert n.metadata.labels[LABEL] == "break-fix", (n.metadata.labels, r.stdout[-3000:])
        assert "GpuopsBreakFix" in node_events(core, node)
    else:
        assert r.returncode == 0, r.stdout[-3000:]
        assert resets.exists() and resets.read_text().splitlines() == [f"3 {uuid3} {bus3}"], r.stdout[-4000:]
        assert n.metadata.labels[LABEL] == "quarantined", n.metadata.labels
        assert "GpuopsBreakFix" not in node_events(core, node)

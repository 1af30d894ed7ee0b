"""The GPU alert rules end to end in the lab: the real Prometheus 3.5.0 scrapes the simulated dcgm-exporters
(hack/gpuops_lab/dcgm.py) of the GPU Operator the simulator plays, through the ServiceMonitor that simulated operator
creates (dcgmExporter.serviceMonitor.enabled), and evaluates the PrometheusRule the collection builds
(module_utils/_gpu_alerts.py), both loaded by the lab's stand-in for the Prometheus Operator (monitoring.sync).

Healthy GPUs fire nothing; an XID 79 injected on one GPU fires GPUXidFallenOffBus for that Hostname and gpu within
the rule's `for` plus a scrape and an evaluation interval; cleared (the GPU reset), the alert resolves. The exporter
reports one DCGM_FI_DEV_GPU_UTIL series per GPU of the nodes' hardware profiles.

Every dashboard panel (module_utils/monitoring/_dashboards.py panels()) is parsed by the real Prometheus and returns
data: a pod holding two GPUs on a DGX node (kwok runs it; the simulated exporter attributes the GPUs to it, so the
per-pod panels see exported_pod/exported_namespace), one of them idle (a gpu_util=0 fault from before the pod starts,
for the "held but idle" panel), an XID on another GPU (a firing alert, a last XID > 0), and the real node_exporter's
infiniband collector on the DGX and L40S nodes' generated sysfs (the RDMA panels). NO_DATA_IN_LAB names the panels that
cannot return data in the lab, with the reason; it is empty.

The whole self-healing chain, with the real ansible-rulebook running the collection's rulebook and its real
remediation playbook (gpuops_lab.eda, playbook gpuops.platform.remediate): in dry-run mode an XID 79 changes nothing
but Events (API snapshot) and the plan is printed; acting, the node running a GPU workload with a PodDisruptionBudget
is cordoned and annotated (alert, GPU UUID and PCI bus id), the workload's pod on it evicted within the budget, the
node handed to break-fix (no host connection), and, the fault cleared, re-validated and returned.

The module runs its own ClusterPolicy simulator instance (like test_gpu_cluster_status_lab.py), so that other tests'
ClusterPolicies do not matter, and starts the lab's monitoring once for both tests (the `gpu_monitoring` fixture;
stopped again afterwards if it started it)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from gpuops_lab import dcgm, eda, monitoring
from gpuops_lab.k8s import wait_for
from gpuops_lab.testing import gpu_alerting, node_events, snapshot
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".state" / "collections"))

from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _dashboards as dash  # noqa: E402

XID_FOR = 5.0
THRESHOLDS = {"xid_for": "5s", "row_remap_failure_for": "5s"}
# a scrape (5 s) and an evaluation (5 s) before the `for` starts, one evaluation after it, and slack for 2 cores
FIRE_WITHIN = XID_FOR + 5 + 5 + 5 + 10
# one remediation playbook run, end to end, on 2 loaded cores (20-30 s measured at load 13); the rulebook runs them
# one at a time (lock gpuops-remediation), and an earlier test's alerts that Alertmanager still delivers come first
PLAYBOOK_RUNS = 3 * 40
# Dashboard panels (title) that cannot return data in the lab, each with the reason. Empty: every panel has data.
NO_DATA_IN_LAB: dict[str, str] = {}
KWOK_TOLERATIONS = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def _ours(alert: dict, nodes: list[str]) -> bool:
    labels = alert["labels"]
    return labels.get("Hostname") in nodes or labels.get("node") in nodes


@pytest.fixture(scope="module")
def gpu_monitoring(cluster):
    """Two DGX H100 nodes and one PCIe L40S node with the simulated GPU Operator (its dcgm-exporter ServiceMonitor),
    the collection's GPU alert rules, and the lab's monitoring scraping them (started here unless it runs)."""
    t_start = time.monotonic()
    with gpu_alerting(cluster, (("dgx-h100", 2), ("pcie-l40s", 1)), THRESHOLDS) as fleet:
        assert fleet.expected_gpus == 8 + 8 + 4
        print(f"e2e monitoring setup: {time.monotonic() - t_start:.1f}s", file=sys.stderr)
        yield fleet


def test_xid79_fires_gpu_xid_fallen_off_bus_for_that_gpu(gpu_monitoring):
    cfg, namespace, nodes = gpu_monitoring.cfg, gpu_monitoring.namespace, gpu_monitoring.nodes
    expected_gpus = gpu_monitoring.expected_gpus
    t_start = time.monotonic()
    try:
        hosts = "|".join(nodes)
        util = f'DCGM_FI_DEV_GPU_UTIL{{Hostname=~"{hosts}",job="nvidia-dcgm-exporter",namespace="{namespace}"}}'

        def counted() -> int:
            got = monitoring.query(cfg, f"count({util})")
            return int(float(got[0]["value"][1])) if got else 0

        assert wait_for(lambda: counted() == expected_gpus, 30, 1.0), f"{counted()} GPU series, not {expected_gpus}"
        one = monitoring.query(cfg, f'{util[:-1]},Hostname="{nodes[0]}",gpu="3"}}')[0]["metric"]
        for label in ("UUID", "pci_bus_id", "device", "modelName", "DCGM_FI_DRIVER_VERSION", "pod", "instance"):
            assert one.get(label), (label, one)
        assert one["container"] == "nvidia-dcgm-exporter" and one["endpoint"] == "gpu-metrics", one

        # healthy: the rules have been evaluated over the scraped series at least twice, and none of ours fires
        def evaluated_twice() -> bool:
            q = f'prometheus_rule_group_iterations_total{{rule_group=~".*{namespace}-gpuops-gpu-alerts.yaml;.*"}}'
            got = monitoring.query(cfg, f"min({q})")
            return bool(got) and float(got[0]["value"][1]) >= 2

        assert wait_for(evaluated_twice, 30, 1.0), "the rule groups were not evaluated"
        time.sleep(5)  # one more scrape and evaluation over every target
        firing = [a for a in monitoring.alerts(cfg) if _ours(a, nodes) and a["state"] == "firing"]
        assert firing == [], firing

        # XID 79 on one GPU
        dcgm.inject(cfg.state, nodes[0], 3, dcgm.PRESETS["xid79"])
        t0 = time.monotonic()

        def fired() -> list[dict]:
            return [
                a
                for a in monitoring.alerts(cfg)
                if a["labels"]["alertname"] == "GPUXidFallenOffBus" and a["state"] == "firing" and _ours(a, nodes)
            ]

        got = wait_for(fired, FIRE_WITHIN, 0.5)
        took = time.monotonic() - t0
        assert got, f"GPUXidFallenOffBus not firing {FIRE_WITHIN:.0f}s after the fault: {monitoring.alerts(cfg)}"
        print(f"GPUXidFallenOffBus firing {took:.1f}s after the injection (for {XID_FOR:.0f}s)", file=sys.stderr)
        assert len(got) == 1, got
        labels = got[0]["labels"]
        assert (labels["Hostname"], labels["gpu"], labels["UUID"]) == (nodes[0], "3", one["UUID"])
        assert (labels["err_code"], labels["severity"], labels["xid_class"]) == ("79", "critical", "bus")
        others = [
            a for a in monitoring.alerts(cfg) if _ours(a, nodes) and a["labels"]["alertname"] != "GPUXidFallenOffBus"
        ]
        assert others == [], others

        # the GPU reset: the XID gauge reads 0 again and the alert resolves
        dcgm.clear(cfg.state, nodes[0], 3)
        assert wait_for(lambda: not fired(), 20, 0.5), "GPUXidFallenOffBus still firing 20s after the clear"
        print(f"e2e alert test: {time.monotonic() - t_start:.1f}s", file=sys.stderr)
    finally:
        dcgm.clear(cfg.state, nodes[0])


def test_xid79_reaches_the_remediation_rulebook(gpu_monitoring, tmp_path):
    """The event half of self-healing end to end: an XID 79 fires GPUXidFallenOffBus in the lab Prometheus, which
    sends it to the lab's real Alertmanager, which routes it to the rulebook's webhook (the collection's source, in
    the real ansible-rulebook): the remediation playbook (a stub here) runs with the contract's event for that node
    and GPU, once while the alert fires, and again with status resolved after the GPU is reset."""
    cfg, nodes = gpu_monitoring.cfg, gpu_monitoring.nodes
    node = nodes[2]  # the L40S node (nodes[0] and nodes[1] are the other tests')
    rulebook = eda.start(tmp_path / "eda", monitoring.port(cfg, "eda-webhook"))
    key = ("GPUXidFallenOffBus", node)
    try:
        series = wait_for(lambda: monitoring.query(cfg, f'DCGM_FI_DEV_GPU_TEMP{{Hostname="{node}",gpu="1"}}'), 30, 1.0)
        assert series, f"no series of GPU 1 on {node}"
        gpu = series[0]["metric"]
        dcgm.inject(cfg.state, node, 1, dcgm.PRESETS["xid79"])
        t0 = time.monotonic()
        assert wait_for(lambda: key in rulebook.recorded(), FIRE_WITHIN + 30, 0.5), (
            f"no remediation run for {key}: Alertmanager {monitoring.alertmanager_alerts(cfg)}; "
            f"rulebook log {rulebook.log.read_text()[-3000:]}"
        )
        print(f"XID 79 to the remediation playbook: {time.monotonic() - t0:.1f}s (for {XID_FOR:.0f}s)", file=sys.stderr)
        record = rulebook.recorded()[key]
        event = record["event"]
        assert record["mode"] == "dry_run"
        assert (event["node"], event["fault_class"], event["action"], event["status"]) == (
            node,
            "bus",
            "quarantine",
            "firing",
        )
        assert event["gpu"] == {"uuid": gpu["UUID"], "pci_bus_id": gpu["pci_bus_id"], "index": 1}
        assert event["labels"]["err_code"] == "79" and event["fingerprint"]
        held = [a for a in monitoring.alertmanager_alerts(cfg) if a["labels"].get("Hostname") == node]
        assert [r["name"] for a in held for r in a["receivers"]] == ["gpuops-remediation"], held

        dcgm.clear(cfg.state, node, 1)  # the GPU reset: the alert resolves and Alertmanager says so
        assert wait_for(lambda: rulebook.recorded()[key]["event"]["status"] == "resolved", 60, 0.5), (
            rulebook.recorded()[key]
        )
        assert [k for k in rulebook.recorded() if k[1] == node] == [key]  # nothing else ran for this node
    finally:
        dcgm.clear(cfg.state, node)
        rulebook.stop()


def _pod_with_gpus(name: str, node: str, gpus: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "tolerations": KWOK_TOLERATIONS,
            "containers": [
                {
                    "name": "train",
                    "image": "registry.invalid/train:1",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


LABEL = "gpuops.platform/remediation"
A = "gpuops.platform/remediation."


def _real_rulebook(fleet, workdir: Path, mode: str) -> eda.Rulebook:
    """The rulebook with the collection's remediation playbook in this mode, on the port the lab's Alertmanager sends
    to; the breaker's state and the GPU Operator's operands in the fleet's namespace."""
    controller = {
        "gpu_operator_namespace": fleet.namespace,
        "gpuops_remediation_namespace": fleet.namespace,
        "gpuops_remediation_drain": {"timeout": 60},
        # the re-validation's smoke pods too: the fleet's teardown removes them with the namespace (a smoke pod left
        # behind holds GPUs another test's guard would count)
        "smoke_tests_namespace": fleet.namespace,
    }
    rulebook = eda.start(
        workdir,
        monitoring.port(fleet.cfg, "eda-webhook"),
        mode=mode,
        playbook=eda.REAL,
        inventory_doc=eda.inventory(fleet.cfg, controller),
    )
    # what Alertmanager still delivers from earlier tests (their resolved alerts) is handled before the injection
    assert rulebook.settle(10, PLAYBOOK_RUNS), rulebook.log.read_text()[-3000:]
    return rulebook


def _gpu_series(cfg, node: str, gpu: int) -> dict:
    got = wait_for(lambda: monitoring.query(cfg, f'DCGM_FI_DEV_GPU_TEMP{{Hostname="{node}",gpu="{gpu}"}}'), 30, 1.0)
    assert got, f"no series of GPU {gpu} on {node}"
    return got[0]["metric"]


def _quiet(cfg, nodes: list[str]) -> bool:
    """No alert of these nodes active in Alertmanager (an earlier test's resolved)."""
    return not [
        a
        for a in monitoring.alertmanager_alerts(cfg)
        if a["labels"].get("Hostname") in nodes and a["status"]["state"] == "active"
    ]


def test_xid79_dry_run_through_the_chain_changes_nothing_but_events(cluster, gpu_monitoring, tmp_path):
    """The whole chain in dry-run mode (the default): XID 79 -> alert -> Alertmanager -> the rulebook -> the real
    remediation playbook, which only records its plan (an Event on the node, the printed plan); the API snapshot is
    the same after the firing and the resolved runs."""
    cfg, core, nodes = gpu_monitoring.cfg, gpu_monitoring.core, gpu_monitoring.nodes
    node = nodes[2]
    assert wait_for(lambda: _quiet(cfg, nodes), 60, 1.0), monitoring.alertmanager_alerts(cfg)
    rulebook = _real_rulebook(gpu_monitoring, tmp_path / "eda", "dry_run")
    try:
        _gpu_series(cfg, node, 0)
        before = snapshot(cluster.api_client)
        planned = len(node_events(core, node).get("GpuopsRemediationPlanned", []))
        dcgm.inject(cfg.state, node, 0, dcgm.PRESETS["xid79"])
        assert wait_for(
            lambda: len(node_events(core, node).get("GpuopsRemediationPlanned", [])) > planned,
            FIRE_WITHIN + PLAYBOOK_RUNS,
            0.5,
        ), f"no plan recorded for {node}: rulebook log {rulebook.log.read_text()[-3000:]}"
        msgs = node_events(core, node)["GpuopsRemediationPlanned"]
        assert any("dry run" in m and "cordon" in m for m in msgs), msgs
        assert wait_for(lambda: "would: cordon" in rulebook.log.read_text(), 60, 0.5), rulebook.log.read_text()[-3000:]
        dcgm.clear(cfg.state, node, 0)
        assert wait_for(lambda: _quiet(cfg, [node]), 60, 1.0), monitoring.alertmanager_alerts(cfg)
        assert wait_for(lambda: rulebook.log.read_text().count("PLAY RECAP") >= 2, PLAYBOOK_RUNS, 0.5), (
            rulebook.log.read_text()[-3000:]
        )
        assert not core.read_node(node).spec.unschedulable
        after = snapshot(cluster.api_client)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert changed == [], f"objects changed by the dry run: {changed}"
    finally:
        dcgm.clear(cfg.state, node)
        rulebook.stop()


def _train_pod(name: str, node: str, gpus: int = 0) -> dict:
    body = _pod_with_gpus(name, node, gpus)
    body["metadata"]["labels"] = {"app": "chain-train"}
    body["metadata"]["annotations"] = {"sim.gpuops.io/run-until-deleted": "1"}
    if not gpus:
        del body["spec"]["containers"][0]["resources"]
    return body


def test_xid79_act_quarantines_drains_repairs_and_returns_the_node(gpu_monitoring, tmp_path):
    """The whole chain acting: XID 79 on one GPU of a node running a GPU workload with a PodDisruptionBudget -> the
    alert fires -> Alertmanager -> the rulebook -> remediate.yml: the node is cordoned and annotated (alert, GPU UUID
    and PCI bus id), the workload's pod on it evicted within its budget, the repair ladder hands the node to break-fix
    (no host connection); the fault cleared, the alert resolves and the node is re-validated and returned."""
    cfg, core, nodes = gpu_monitoring.cfg, gpu_monitoring.core, gpu_monitoring.nodes
    namespace = gpu_monitoring.namespace
    node, other = nodes[2], nodes[1]
    policy = client.PolicyV1Api(core.api_client)
    assert wait_for(lambda: _quiet(cfg, nodes), 60, 1.0), monitoring.alertmanager_alerts(cfg)
    assert wait_for(
        lambda: int((core.read_node(node).status.allocatable or {}).get("nvidia.com/gpu", "0")) == 4, 30, 0.5
    ), "the simulated device plugin did not advertise the L40S node's 4 GPUs"
    core.create_namespaced_pod(namespace, _train_pod("chain-0", node, 1))
    core.create_namespaced_pod(namespace, _train_pod("chain-1", other))
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "chain-train"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "chain-train"}}},
    }
    policy.create_namespaced_pod_disruption_budget(namespace, pdb)
    rulebook = None
    try:

        def allowed() -> int:
            got = policy.read_namespaced_pod_disruption_budget("chain-train", namespace)
            return got.status.disruptions_allowed or 0

        assert wait_for(lambda: allowed() == 1, 60, 0.5), "the PodDisruptionBudget never allowed one disruption"
        gpu = _gpu_series(cfg, node, 2)
        rulebook = _real_rulebook(gpu_monitoring, tmp_path / "eda", "act")
        dcgm.inject(cfg.state, node, 2, dcgm.PRESETS["xid79"])
        t0 = time.monotonic()
        assert wait_for(lambda: core.read_node(node).spec.unschedulable, FIRE_WITHIN + PLAYBOOK_RUNS, 0.2), (
            f"{node} not cordoned: Alertmanager {monitoring.alertmanager_alerts(cfg)}; "
            f"rulebook log {rulebook.log.read_text()[-3000:]}"
        )
        print(f"XID 79 to the cordon through the chain: {time.monotonic() - t0:.1f}s", file=sys.stderr)
        ann = core.read_node(node).metadata.annotations
        assert ann[A + "alert"] == "GPUXidFallenOffBus" and ann[A + "fault-class"] == "bus", ann
        # the PCI bus id as the quarantine writes it: lower-case hex (DCGM's label is upper-case)
        assert (ann[A + "gpu-uuid"], ann[A + "gpu-pci-bus-id"]) == (gpu["UUID"], gpu["pci_bus_id"].lower()), ann

        # drained within the budget (the pod elsewhere stays), then handed to break-fix: no host connection
        def pods_on(where: str) -> list[str]:
            got = core.list_namespaced_pod(namespace, label_selector="app=chain-train").items
            return [p.metadata.name for p in got if p.spec.node_name == where]

        assert wait_for(lambda: pods_on(node) == [], PLAYBOOK_RUNS, 0.5), (
            pods_on(node),
            rulebook.log.read_text()[-3000:],
        )
        assert pods_on(other) == ["chain-1"]
        assert wait_for(
            lambda: (core.read_node(node).metadata.labels or {}).get(LABEL) == "break-fix", PLAYBOOK_RUNS, 0.5
        ), rulebook.log.read_text()[-3000:]
        # each Event is recorded after the patch it reports (a second request): the label can be seen first
        marks = {"GpuopsQuarantined", "GpuopsDrained", "GpuopsBreakFix"}
        assert wait_for(lambda: marks <= set(node_events(core, node)), 10, 0.2), node_events(core, node)

        # the GPU repaired: the fault cleared, the alert resolves, the node is re-validated and returned
        dcgm.clear(cfg.state, node, 2)
        t1 = time.monotonic()
        assert wait_for(lambda: not core.read_node(node).spec.unschedulable, FIRE_WITHIN + PLAYBOOK_RUNS, 0.5), (
            f"{node} not returned: rulebook log {rulebook.log.read_text()[-4000:]}"
        )
        print(f"clear to the return: {time.monotonic() - t1:.1f}s", file=sys.stderr)
        n = core.read_node(node)
        assert LABEL not in (n.metadata.labels or {})
        assert not [k for k in n.metadata.annotations or {} if k.startswith(A)]
        # the module records the Event after the node's patch (a second request): the uncordon can be seen first
        assert wait_for(lambda: "GpuopsReturned" in node_events(core, node), 10, 0.2), node_events(core, node)
    finally:
        dcgm.clear(cfg.state, node)
        if rulebook is not None:
            rulebook.stop()
        policy.delete_namespaced_pod_disruption_budget("chain-train", namespace)
        for name in ("chain-0", "chain-1"):
            try:
                core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
        if core.read_node(node).spec.unschedulable:  # a failed run: the later tests need the node schedulable
            core.patch_node(node, {"spec": {"unschedulable": False}})


def test_every_dashboard_panel_returns_data(gpu_monitoring):
    """Every panel query of the collection's dashboards, run by the lab's Prometheus, returns at least one sample
    (save the panels NO_DATA_IN_LAB names, with their reason)."""
    cfg, core, namespace, nodes = (
        gpu_monitoring.cfg,
        gpu_monitoring.core,
        gpu_monitoring.namespace,
        gpu_monitoring.nodes,
    )
    t0 = time.monotonic()
    node = nodes[1]  # a DGX H100 (nodes[0] is the XID test's)
    # before the pod holds them: GPU 0 idle (the "held but idle" panel), an XID on GPU 7 (a firing alert, last XID)
    dcgm.inject(cfg.state, node, 0, {"gpu_util": 0})
    dcgm.inject(cfg.state, node, 7, dcgm.PRESETS["xid79"])
    pod = "trainer-0"
    try:
        assert wait_for(
            lambda: int((core.read_node(node).status.allocatable or {}).get("nvidia.com/gpu", "0")) == 8, 30, 0.5
        ), "the simulated device plugin did not advertise 8 GPUs"
        core.create_namespaced_pod(namespace, _pod_with_gpus(pod, node, 2))
        assert wait_for(lambda: core.read_namespaced_pod(pod, namespace).status.phase == "Running", 30, 0.5)
        res = monitoring.sync(cfg, core.api_client)  # at once, not at the sync loop's next round
        assert node in res.exporter_nodes
        held = f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{node}",exported_namespace="{namespace}",exported_pod="{pod}"}}'
        got = wait_for(lambda: monitoring.query(cfg, held), 20, 0.5)
        assert got, f"no series of {node}'s GPUs attributed to {namespace}/{pod}"
        # the rule: the only GPU pod on the node, asking for 2, holds GPUs 0 and 1 (lowest free indices)
        assert sorted(r["metric"]["gpu"] for r in got) == ["0", "1"], got
        assert {r["metric"]["exported_container"] for r in got} == {"train"}
        assert {r["metric"]["container"] for r in got} == {"nvidia-dcgm-exporter"}  # the exporter's own target label

        panels = dash.panels()
        assert len(panels) >= 20 and not set(NO_DATA_IN_LAB) - {p["title"] for p in panels}

        def empty() -> list[str]:
            return [
                p["title"] for p in panels if p["title"] not in NO_DATA_IN_LAB and not monitoring.query(cfg, p["expr"])
            ]

        # the XID alert fires after its `for` (5 s) plus a scrape and an evaluation; rate() needs two scrapes
        wait_for(lambda: not empty(), FIRE_WITHIN, 1.0)
        missing = empty()
        assert missing == [], f"dashboard panels without data in the lab: {missing}"
        rdma = monitoring.query(cfg, 'node_infiniband_port_data_transmitted_bytes_total{job="node-exporter"}')
        assert {r["metric"]["instance"] for r in rdma} >= set(nodes), rdma
        assert {r["metric"]["device"] for r in rdma if r["metric"]["instance"] == node} == {
            f"mlx5_{i}" for i in range(8)
        }
        print(f"e2e dashboard panels: {len(panels)} with data after {time.monotonic() - t0:.1f}s", file=sys.stderr)
    finally:
        dcgm.clear(cfg.state, node)
        try:
            core.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
        except client.ApiException as exc:
            if exc.status != 404:
                raise

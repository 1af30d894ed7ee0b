"""The whole run is planned before its first change (issue 28 §0): `ansible-playbook site.yml` with one bad value that
used to be refused only by its own role's preflight - after NFD, the GPU Operator and the sharing ConfigMaps had
changed the cluster - now stops in the run's preflight. Each case: the run fails, its message names the value and says
nothing was changed, and an API snapshot (every object of every listable kind, the nodes' labels and annotations)
agrees.

Before the fix, `-e gpu_operator_chart_version=v99.0.0` on a fresh lab ended with "... is not in <repo> ... Nothing
was changed" after the NFD release, the gpu-operator namespace and the sharing ConfigMaps had been created."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpuops_lab.testing import site_run
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
TEAM = {"name": "t", "cohort": "all", "namespaces": ["t"]}

# (id, extra vars, what the refusal must name)
CASES = [
    ("chart-version-not-published", {"gpu_operator_chart_version": "v99.0.0"}, "gpu-operator v99.0.0 is not in"),
    (
        "kueue-lending-above-nominal",
        {
            "gpuops_batch_schedulers": ["kueue"],
            "kueue_flavors": [{"name": "x"}],
            "kueue_teams": [
                {**TEAM, "quotas": [{"flavor": "x", "resources": {"cpu": {"nominal": 2, "lending_limit": 4}}}]}
            ],
        },
        "lending_limit 4 > nominal 2",
    ),
    (
        "volcano-weight-negative",
        {"gpuops_batch_schedulers": ["volcano"], "volcano_queues": [{"name": "q", "weight": -1}]},
        "volcano_queues[0].weight: -1",
    ),
    (
        "kai-parent-missing",
        {"gpuops_batch_schedulers": ["kai_scheduler"], "kai_scheduler_queues": [{"name": "q", "parent": "nope"}]},
        "nope",
    ),
    (
        "monitoring-threshold-not-a-number",
        {"gpuops_monitoring_managed": True, "monitoring_alert_thresholds": {"gpu_temp_celsius": "hot"}},
        "gpu_temp_celsius",
    ),
]


def refused_before_any_change(cluster, tmp_path, extra, names):
    """Run site.yml with ``extra``; assert it stopped in the run's preflight, naming ``names``, and changed nothing."""
    r, changed = site_run(cluster, tmp_path, extra)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-4000:]
    assert names in out, out[-4000:]
    assert "nothing was changed" in out.lower(), out[-4000:]
    # the run stopped in its preflight: no task of the host plane or of a layer that changes the cluster ran
    assert "TASK [gpuops.platform.helm_release" not in out, out[-4000:]
    assert "TASK [gpuops.platform.host_prep" not in out, out[-4000:]
    assert changed == {}


@pytest.mark.parametrize(("extra", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_late_rule_stops_the_run_before_its_first_change(cluster, tmp_path, extra, names):
    refused_before_any_change(cluster, tmp_path, extra, names)


# GPU Feature Discovery's labels of an H100 80GB node, as the GPU Operator writes them
GFD_H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}


def test_a_mig_name_that_does_not_fit_the_gpu_model_stops_the_run_before_the_host_plane(cluster, tmp_path):
    """A MIG pool by node selector whose name is another GPU's layout (all-1g.5gb is A100 40GB's) was refused by the
    gpu_sharing role's preflight, after the host plane, NFD and the GPU Operator's namespace; the run's plan refuses
    it first where the node's GPU model is known: here from GPU Feature Discovery's labels (a cluster the GPU
    Operator already labelled; on a fresh node the plan can only warn, tests/unit test_sharing_plan.py)."""
    core = client.CoreV1Api(cluster.api_client)
    labels = core.read_node("dgx-h100-0").metadata.labels or {}
    added = {k: v for k, v in GFD_H100.items() if k not in labels}
    core.patch_node("dgx-h100-0", {"metadata": {"labels": added}})
    pool = {"name": "m", "model": "mig", "node_selector": {"kubernetes.io/hostname": "dgx-h100-0"}}
    try:
        refused_before_any_change(
            cluster, tmp_path, {"gpu_sharing_pools": [dict(pool, mig_config="all-1g.5gb")]}, "all-1g.5gb"
        )
    finally:
        core.patch_node("dgx-h100-0", {"metadata": {"labels": dict.fromkeys(added)}})


def test_a_second_nfd_stops_the_run_before_the_host_plane(cluster, namespace, tmp_path):
    """An NFD worker DaemonSet of another release (an operator's bundled NFD) was refused by the nfd role's preflight,
    after the host plane had changed the hosts; the plan refuses it first."""
    apps = client.AppsV1Api(cluster.api_client)
    labels = {"app.kubernetes.io/name": "node-feature-discovery", "role": "worker"}
    apps.create_namespaced_daemon_set(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "bundled-nfd-worker", "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"gpuops.test/no-such-node": "true"},  # no pod: only the object matters
                        "containers": [
                            {"name": "worker", "image": "registry.k8s.io/nfd/node-feature-discovery:v0.19.0"}
                        ],
                    },
                },
            },
        },
    )
    refused_before_any_change(cluster, tmp_path, {}, f"NFD worker DaemonSet {namespace}/bundled-nfd-worker")

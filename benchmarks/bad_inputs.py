"""Bad cluster inputs, refused before any change: each case is one wrong value a user could give (issue 27's list
and the rules of plugins/module_utils/inputs/), run through the run's inputs preflight and plan
(playbooks/preflight.yml as site.yml imports it, with _gpuops_plan; it changes nothing) on the demo inventory. A case
is *refused before any change* when the preflight fails and its message names the variable; the rest are refused
later, by a role's own preflight after earlier layers changed the cluster, or not at all - both listed.

    PYTHONPATH=hack .venv/bin/python benchmarks/bad_inputs.py [--only ID,ID] [--jobs 2]

Needs the lab's kubeconfig (`make up`); reads nothing else of the cluster. Results: results/bad-inputs-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _bench import ansible_env, write_result
from gpuops_lab.config import REPO

KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
VOLCANO = {"gpuops_batch_schedulers": ["volcano"]}
KAI = {"gpuops_batch_schedulers": ["kai_scheduler"]}
MON = {"gpuops_monitoring_managed": True}
SRIOV = {"gpuops_sriov_network_operator_managed": True, "network_operator_mode": "rdma_shared"}
SMOKE = {"gpuops_smoke_tests_managed": True}
OFED = {"network_operator_ofed_driver_enabled": True}  # the demo inventory turns the DOCA driver (and its rules) off
TEAM = {"name": "t", "namespaces": ["t"], "quotas": [{"flavor": "f", "resources": {"nvidia.com/gpu": 1}}]}
H100_0 = {"kubernetes.io/hostname": "dgx-h100-0"}  # an H100 80GB node of the demo inventory
FLAVOR_X = {"kueue_flavors": [{"name": "x"}]}  # a flavor known before the GPU Operator labelled any node

# (id, extra vars, the variable the refusal must name)
CASES: list[tuple[str, dict[str, Any], str]] = [
    # collection-wide
    ("gpuops-kubeconfig-missing", {"gpuops_kubeconfig": "/nonexistent/kubeconfig"}, "gpuops_kubeconfig"),
    ("gpuops-context-missing", {"gpuops_kubeconfig_context": "nope"}, "gpuops_kubeconfig_context"),
    ("gpuops-mirror-not-url", {"gpuops_chart_repo_mirror": "charts.local"}, "gpuops_chart_repo_mirror"),
    ("gpuops-mirror-newline", {"gpuops_chart_repo_mirror": "https://charts.local\n"}, "gpuops_chart_repo_mirror"),
    ("gpuops-ca-file-missing", {"gpuops_chart_repo_ca_file": "/nonexistent/ca.pem"}, "gpuops_chart_repo_ca_file"),
    ("gpuops-misspelled-switch", {"gpuops_nfd_manged": False}, "gpuops_nfd_manged"),
    ("gpuops-scheduler-unknown", {"gpuops_batch_schedulers": ["slurm"]}, "gpuops_batch_schedulers"),
    ("gpuops-upgrade-timeout-negative", {"gpuops_upgrade_timeout": -1}, "gpuops_upgrade_timeout"),
    ("gpuops-managed-not-bool", {"gpuops_monitoring_managed": "sometimes"}, "gpuops_monitoring_managed"),
    ("two-nfds-gpu-operator", {"gpu_operator_nfd_enabled": True}, "gpuops_nfd_managed"),
    ("two-nfds-network-operator", {"network_operator_nfd_managed": False}, "gpuops_nfd_managed"),
    # NFD
    ("nfd-chart-version-range", {"nfd_chart_version": ">=0.19"}, "nfd_chart_version"),
    ("nfd-namespace-invalid", {"nfd_namespace": "NFD"}, "nfd_namespace"),
    ("nfd-wait-timeout-negative", {"nfd_wait_timeout": -5}, "nfd_wait_timeout"),
    ("nfd-values-not-dict", {"nfd_values": "master.replicas=2"}, "nfd_values"),
    ("nfd-variable-typo", {"nfd_chart_verison": "0.19.0"}, "nfd_chart_verison"),
    # GPU Operator
    ("gpu-operator-driver-newline", {"gpu_operator_driver_version": "570.124.06\n"}, "gpu_operator_driver_version"),
    ("gpu-operator-driver-shell", {"gpu_operator_driver_version": "570;id"}, "gpu_operator_driver_version"),
    ("gpu-operator-chart-latest", {"gpu_operator_chart_version": "latest"}, "gpu_operator_chart_version"),
    ("gpu-operator-chart-newline", {"gpu_operator_chart_version": "v26.7.0\n"}, "gpu_operator_chart_version"),
    ("gpu-operator-release-invalid", {"gpu_operator_release_name": "GPU Operator"}, "gpu_operator_release_name"),
    ("gpu-operator-wait-timeout-negative", {"gpu_operator_wait_timeout": -1}, "gpu_operator_wait_timeout"),
    (
        "gpu-operator-max-parallel-negative",
        {"gpu_operator_driver_upgrade_policy": {"autoUpgrade": True, "maxParallelUpgrades": -1}},
        "gpu_operator_driver_upgrade_policy.maxParallelUpgrades",
    ),
    (
        "gpu-operator-upgrade-policy-typo",
        {"gpu_operator_driver_upgrade_policy": {"autoUpgrade": True, "maxParalelUpgrades": 2}},
        "gpu_operator_driver_upgrade_policy.maxParalelUpgrades",
    ),
    ("gpu-operator-mig-strategy-typo", {"gpu_operator_mig_strategy": "mixd"}, "gpu_operator_mig_strategy"),
    ("gpu-operator-variable-typo", {"gpu_operator_mig_stratgy": "mixed"}, "gpu_operator_mig_stratgy"),
    ("gpu-operator-ngc-key-list", {"gpu_operator_ngc_api_key": ["nvapi-x", "y"]}, "gpu_operator_ngc_api_key"),
    ("gpu-operator-values-kind", {"gpu_operator_values": {"driver": {"enabled": "no"}}}, "gpu_operator_values"),
    # GPU sharing
    (
        "sharing-group-unknown",
        {"gpu_sharing_pools": [{"name": "p", "model": "time_slicing", "group": "l40s_inferenc", "replicas": 4}]},
        "gpu_sharing_pools[0].group",
    ),
    (
        "sharing-host-in-two-pools",
        {
            "gpu_sharing_pools": [
                {"name": "a", "model": "time_slicing", "group": "l40s_inference", "replicas": 4},
                {"name": "b", "model": "mps", "group": "l40s_inference", "replicas": 2},
            ]
        },
        "pcie-l40s-0",
    ),
    (
        "sharing-replicas-one",
        {"gpu_sharing_pools": [{"name": "p", "model": "time_slicing", "group": "l40s_inference", "replicas": 1}]},
        "gpu_sharing_pools[0]",
    ),
    (
        "sharing-model-unknown",
        {"gpu_sharing_pools": [{"name": "p", "model": "timeslicing", "group": "l40s_inference"}]},
        "gpu_sharing_pools[0]",
    ),
    ("sharing-mig-strategy", {"gpu_sharing_mig_strategy": "both"}, "gpu_sharing_mig_strategy"),
    ("sharing-namespace-invalid", {"gpu_sharing_namespace": "gpu_operator"}, "gpu_sharing_namespace"),
    (  # the H100's GPU model is known up front from its host facts or GFD labels (a fresh node: a warning there)
        "sharing-mig-on-h100-80gb-wrong-profile",
        {"gpu_sharing_pools": [{"name": "m", "model": "mig", "node_selector": H100_0, "mig_config": "all-1g.5gb"}]},
        "all-1g.5gb",
    ),
    (
        "sharing-mig-name-no-gpu-has",
        {"gpu_sharing_pools": [{"name": "m", "model": "mig", "node_selector": H100_0, "mig_config": "all-1g.10g"}]},
        "gpu_sharing_pools[0].mig_config",
    ),
    (
        "sharing-selector-matches-no-node",
        {
            "gpu_sharing_pools": [
                {"name": "m", "model": "mig", "node_selector": {"a": "b"}, "mig_config": "all-1g.10gb"}
            ]
        },
        "gpu_sharing_pools[m]",
    ),
    # Network Operator
    ("network-mode-typo", {"network_operator_mode": "rdma-shared"}, "network_operator_mode"),
    ("network-wait-timeout-zero", {"network_operator_wait_timeout": 0}, "network_operator_wait_timeout"),
    (
        "network-max-parallel-negative",
        {**OFED, "network_operator_ofed_driver_upgrade_policy": {"maxParallelUpgrades": -1}},
        "network_operator_ofed_driver_upgrade_policy.maxParallelUpgrades",
    ),
    (
        "network-ofed-version-newline",
        {**OFED, "network_operator_ofed_driver_version": "24.10-1.1.4.0\n"},
        "network_operator",
    ),
    # SR-IOV Network Operator
    ("sriov-chart-unpinned", {**SRIOV, "sriov_network_operator_chart_version": "1.x"}, "sriov_network_operator"),
    ("sriov-variable-typo", {**SRIOV, "sriov_network_operator_namepsace": "x"}, "sriov_network_operator_namepsace"),
    # Kueue
    ("kueue-team-field-typo", {"kueue_teams": [{**TEAM, "quotsa": []}]}, "kueue_teams[0].quotsa"),
    ("kueue-team-no-name", {"kueue_teams": [{"namespaces": ["t"]}]}, "kueue_teams[0].name"),
    ("kueue-team-strategy", {"kueue_teams": [{**TEAM, "queueing_strategy": "FIFO"}]}, "kueue_teams[0]"),
    ("kueue-integration-unknown", {"kueue_integrations": ["batch/jobs"]}, "kueue_integrations"),
    ("kueue-wait-timeout-negative", {"kueue_wait_timeout": -30}, "kueue_wait_timeout"),
    (
        "kueue-negative-quota",
        {"kueue_teams": [{**TEAM, "quotas": [{"flavor": "f", "resources": {"nvidia.com/gpu": -1}}]}]},
        "kueue",
    ),
    # Volcano
    (
        "volcano-queue-field-typo",
        {**VOLCANO, "volcano_queues": [{"name": "q", "wieght": 2}]},
        "volcano_queues[0].wieght",
    ),
    ("volcano-queue-weight-kind", {**VOLCANO, "volcano_queues": [{"name": "q", "weight": "heavy"}]}, "volcano_queues"),
    (
        "volcano-guarantee-above-capability",
        {
            **VOLCANO,
            "volcano_queues": [{"name": "q", "capability": {"nvidia.com/gpu": 2}, "guarantee": {"nvidia.com/gpu": 4}}],
        },
        "guarantee",
    ),
    ("volcano-weight-negative", {**VOLCANO, "volcano_queues": [{"name": "q", "weight": -1}]}, "weight"),
    (  # the real webhook (1.15.1) refuses a guarantee without a deserved share after the release (found in the lab)
        "volcano-guarantee-without-deserved",
        {**VOLCANO, "volcano_queues": [{"name": "q", "weight": 2, "guarantee": {"nvidia.com/gpu": 4}}]},
        "guarantee",
    ),
    # KAI Scheduler
    (
        "kai-queue-field-typo",
        {**KAI, "kai_scheduler_queues": [{"name": "q", "resorces": {}}]},
        "kai_scheduler_queues[0].resorces",
    ),
    ("kai-queue-missing-parent", {**KAI, "kai_scheduler_queues": [{"name": "q", "parent": "nope"}]}, "nope"),
    (
        "kai-quota-negative",
        {**KAI, "kai_scheduler_queues": [{"name": "q", "resources": {"gpu": {"quota": -5}}}]},
        "quota",
    ),
    # monitoring
    ("monitoring-scrape-interval", {**MON, "monitoring_scrape_interval": "five seconds"}, "monitoring_scrape_interval"),
    ("monitoring-port", {**MON, "monitoring_network_port": 70000}, "monitoring_network_port"),
    ("monitoring-prometheus-url", {**MON, "monitoring_prometheus_url": "prometheus:9090"}, "monitoring_prometheus_url"),
    ("monitoring-threshold-typo", {**MON, "monitoring_alert_thresholds": {"xid_fr": "5m"}}, "xid_fr"),
    ("monitoring-threshold-hot", {**MON, "monitoring_alert_thresholds": {"gpu_temp_celsius": "hot"}}, "hot"),
    # the plan: charts published, the rules that read the cluster (issue 28 §0)
    ("gpu-operator-chart-not-published", {"gpu_operator_chart_version": "v99.0.0"}, "gpu_operator_chart_version"),
    ("nfd-chart-not-published", {"nfd_chart_version": "0.99.0"}, "nfd_chart_version"),
    (
        "kueue-lending-above-nominal",
        {
            **FLAVOR_X,
            "kueue_teams": [
                {
                    **TEAM,
                    "cohort": "all",
                    "quotas": [{"flavor": "x", "resources": {"cpu": {"nominal": 2, "lending_limit": 4}}}],
                }
            ],
        },
        "lending_limit",
    ),
    (
        "kueue-borrowing-without-cohort",
        {
            **FLAVOR_X,
            "kueue_teams": [
                {**TEAM, "quotas": [{"flavor": "x", "resources": {"cpu": {"nominal": 2, "borrowing_limit": 1}}}]}
            ],
        },
        "cohort",
    ),
    (
        "kueue-quota-not-a-quantity",
        {**FLAVOR_X, "kueue_teams": [{**TEAM, "quotas": [{"flavor": "x", "resources": {"cpu": "16x"}}]}]},
        "16x",
    ),
    (
        "kueue-preemption-invalid",
        {"kueue_teams": [{**TEAM, "preemption": {"within_cluster_queue": "Sometimes"}}]},
        "preemption",
    ),
    (
        "volcano-capability-negative",
        {**VOLCANO, "volcano_queues": [{"name": "q", "capability": {"nvidia.com/gpu": -2}}]},
        "capability",
    ),
    # smoke tests
    ("smoke-timeout-negative", {**SMOKE, "smoke_tests_timeout": -1}, "smoke_tests_timeout"),
    ("smoke-variable-typo", {**SMOKE, "smoke_tests_imgae": "x"}, "smoke_tests_imgae"),
]


def run_case(case: tuple[str, dict[str, Any], str], tmp: Path) -> dict[str, Any]:
    cid, extra, names = case
    path = tmp / f"{cid}.json"
    path.write_text(json.dumps(extra))
    t0 = time.monotonic()
    proc = subprocess.run(
        # as site.yml imports it: with the plan of the roles the run applies (charts, rules that read the cluster)
        [
            "ansible-playbook",
            "playbooks/preflight.yml",
            "-i",
            "inventories/local",
            "-e",
            "_gpuops_plan=true",
            "-e",
            f"@{path}",
        ],
        cwd=REPO,
        env=ansible_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    refused = proc.returncode != 0
    return {
        "id": cid,
        "refused_before_any_change": refused and names in out,
        "failed": refused,
        "names_it": names in out,
        "took_s": round(time.monotonic() - t0, 1),
        "tail": "" if refused and names in out else out[-600:],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated case ids")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    wanted = set(filter(None, args.only.split(",")))
    cases = [c for c in CASES if not wanted or c[0] in wanted]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run_case(c, Path(tmp)), cases))
    refused = [r["id"] for r in results if r["refused_before_any_change"]]
    later = [r["id"] for r in results if not r["refused_before_any_change"]]
    out = {
        "cases": len(results),
        "refused_before_any_change": len(refused),
        "not_refused_by_the_preflight": later,
        "results": results,
    }
    write_result("bad-inputs", out, stamp="%Y%m%d-%H%M")


if __name__ == "__main__":
    main()

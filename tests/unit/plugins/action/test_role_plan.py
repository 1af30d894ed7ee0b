"""gpuops.platform.role_plan: a role's plan in one task - what each role reads (its queries), what its ``plan`` builds
from the read, and the verdict on the findings (as gpuops.platform.judge gives it), as tables."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.action.role_plan import PLANS, plan_result
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue as kq

H100 = "NVIDIA-H100-80GB-HBM3"
NODE = {
    "metadata": {"name": "dgx-0", "labels": {"nvidia.com/gpu.product": H100}},
    "status": {"allocatable": {"nvidia.com/gpu": "8"}},
}
KUEUE = {
    "kueue_state": "present",
    "kueue_chart_version": "0.19.2",
    "kueue_integrations": ["batch/job"],
    "kueue_gpu_flavors": True,
    "kueue_flavors": [],
    "kueue_teams": [
        {
            "name": "research",
            "namespaces": ["research"],
            "quotas": [{"flavor": H100, "resources": {"nvidia.com/gpu": 8}}],
        }
    ],
}


def crd(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def read(**objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {"objects": {key: {"resources": res, "api_found": True, "skipped": False} for key, res in objects.items()}}


def nfd_worker(namespace: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": "nfd-worker"}}


@pytest.mark.parametrize(
    ("role", "variables", "want"),
    [
        (
            "kueue",
            KUEUE,
            [
                {"key": "nodes", "kind": "Node"},
                {
                    "key": "crds",
                    "api_version": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata_only": True,
                },
                {"key": "namespaces", "kind": "Namespace", "metadata_only": True},
            ],
        ),
        (
            "nfd",
            {"nfd_state": "present", "nfd_namespace": "nfd"},
            [
                {
                    "key": "workers",
                    "api_version": "apps/v1",  # cluster_objects_info's default is v1, which serves no DaemonSet
                    "kind": "DaemonSet",
                    "label_selectors": ["app.kubernetes.io/name=node-feature-discovery", "role=worker"],
                    "skip": False,
                }
            ],
        ),
        ("nfd", {"nfd_state": "absent", "nfd_namespace": "nfd"}, [{"skip": True}]),
    ],
)
def test_each_role_reads_what_its_rules_need(role, variables, want):
    got = PLANS[(role, "preflight")][0](variables)
    assert len(got) == len(want)
    for query, expect in zip(got, want, strict=True):
        assert {k: query[k] for k in expect} == expect


@pytest.mark.parametrize(
    ("role", "variables", "objects", "planning", "failed", "ids", "extra"),
    [
        # kueue: a flavor per GPU product, a queue per team; Kueue's CRDs served
        (
            "kueue",
            KUEUE,
            {"nodes": [NODE], "crds": [crd("clusterqueues.kueue.x-k8s.io")]},
            False,
            False,
            [],
            {"crds_present": True},
        ),
        # an old KAI Scheduler next to Kueue (its CRDs, without its own Topology CRD): an error, nothing changed
        (
            "kueue",
            KUEUE,
            {"nodes": [NODE], "crds": [crd(sorted(kq.KAI_CRDS)[0])]},
            False,
            True,
            ["kueue-kai-topology-conflict"],
            {},
        ),
        # no GPU product label yet (the GPU Operator has not run): in the run's plan a warning, otherwise an error
        ("kueue", KUEUE, {"nodes": [], "crds": []}, True, False, None, {}),
        ("kueue", KUEUE, {"nodes": [], "crds": []}, False, True, None, {}),
        # kueue_state absent: nothing is judged
        (
            "kueue",
            {**KUEUE, "kueue_state": "absent"},
            {"nodes": [], "crds": [crd(sorted(kq.KAI_CRDS)[0])]},
            False,
            False,
            [],
            {},
        ),
        # nfd: the role's own worker is no conflict; one elsewhere is a second NFD
        (
            "nfd",
            {"nfd_state": "present", "nfd_namespace": "nfd"},
            {"workers": [nfd_worker("nfd")]},
            False,
            False,
            [],
            {},
        ),
        (
            "nfd",
            {"nfd_state": "present", "nfd_namespace": "nfd"},
            {"workers": [nfd_worker("nfd"), nfd_worker("gpu-operator")]},
            False,
            True,
            ["nfd-second-instance"],
            {},
        ),
        (
            "nfd",
            {"nfd_state": "absent", "nfd_namespace": "nfd"},
            {"workers": [nfd_worker("gpu-operator")]},
            False,
            False,
            [],
            {},
        ),
    ],
)
def test_the_plan_and_its_verdict(role, variables, objects, planning, failed, ids, extra):
    result = plan_result(role, variables, read(**objects), planning, "Nothing was changed.")
    assert result["failed"] is failed and result["changed"] is False, result["msg"]
    if ids is not None:
        assert [f["id"] for f in result["findings"]] == ids
    for key, value in extra.items():
        assert result[key] == value
    if failed:
        assert result["msg"].startswith(role) and result["msg"].endswith("Nothing was changed.")
        # the verdict alone: nothing built is returned to bury the message
        assert set(result) == {"changed", "failed", "msg", "lines", "counts", "findings"}


def test_kueue_plan_builds_what_the_role_applies():
    result = plan_result("kueue", KUEUE, read(nodes=[NODE], crds=[]), False, "")
    assert [f["metadata"]["name"] for f in result["resource_flavors"]] == ["nvidia-h100-80gb-hbm3"]
    assert [q["metadata"]["name"] for q in result["cluster_queues"]] == ["research"]
    assert [q["metadata"]["namespace"] for q in result["local_queues"]] == ["research"]
    assert result["namespaces"] == ["research"]
    # the team namespaces the cluster lacks are the role's to create; an existing one is not
    assert result["missing_namespaces"] == ["research"]
    there = plan_result("kueue", KUEUE, read(nodes=[NODE], crds=[], namespaces=[crd("research")]), False, "")
    assert there["missing_namespaces"] == []


def test_a_failed_read_names_the_role():
    result = plan_result("nfd", {"nfd_state": "present"}, {"failed": True, "msg": "connection refused"}, False, "")
    assert result["failed"] is True and result["msg"] == "nfd: the plan's cluster read failed: connection refused"


# monitoring: the reads follow the mode and the switches; phase release rebuilds from the live Prometheus (install)
MON = {
    "monitoring_state": "present",
    "monitoring_mode": "attach",
    "monitoring_namespace": "monitoring",
    "monitoring_prometheus_namespace": "",
    "monitoring_nvidia": True,
    "monitoring_nvidia_namespace": "gpu-operator",
    "monitoring_amd": False,
    "monitoring_amd_namespace": "kube-amd-gpu",
    "monitoring_network": False,
    "monitoring_network_namespace": "nvidia-network-operator",
    "monitoring_scrape_interval": "15s",
    "monitoring_alert_thresholds": {},
    "monitoring_dashboards": True,
    "monitoring_dashboard_labels": {"grafana_dashboard": "1"},
    "monitoring_remediation_webhook_url": "",
    "monitoring_alertmanager_namespace": "monitoring",
}
KPS = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "Prometheus",
    "metadata": {"name": "kps-prometheus", "namespace": "monitoring"},
    "spec": {
        "serviceMonitorSelector": {"matchLabels": {"release": "kps"}},
        "serviceMonitorNamespaceSelector": {},
        "ruleSelector": {"matchLabels": {"release": "kps"}},
        "ruleNamespaceSelector": {},
    },
}


@pytest.mark.parametrize(
    ("variables", "skipped"),
    [
        # attach: the Prometheus to attach to is read; no network, no remediation route
        (MON, {"network_namespace", "alertmanagers", "alertmanagerconfigs_crd"}),
        # install: the chart renders the Prometheus (not read before the release)
        (
            {**MON, "monitoring_mode": "install"},
            {"prometheuses", "network_namespace", "alertmanagers", "alertmanagerconfigs_crd"},
        ),
        # an attached remediation route reads its Alertmanager and CRD; monitoring_network its namespace
        ({**MON, "monitoring_remediation_webhook_url": "http://rb:5050/alerts", "monitoring_network": True}, set()),
        (
            {**MON, "monitoring_nvidia": "false"},
            {"cluster_policy", "network_namespace", "alertmanagers", "alertmanagerconfigs_crd"},
        ),
    ],
)
def test_monitoring_reads_what_its_mode_and_switches_need(variables, skipped):
    queries = PLANS[("monitoring", "preflight")][0](variables)
    assert {q["key"] for q in queries if q.get("skip")} == skipped
    assert next(q for q in queries if q["key"] == "namespace")["name"] == "monitoring"


def test_monitoring_plan_builds_and_judges():
    result = plan_result("monitoring", MON, read(namespace=[], prometheuses=[KPS], cluster_policy=[]), False, "stop.")
    assert result["failed"] is False, result["msg"]
    assert {o["kind"] for o in result["objects"]} >= {"ServiceMonitor", "PrometheusRule"}
    assert result["remediation_route"] == ""  # no webhook: the validation's route check is skipped on it
    # attach without a Prometheus to attach to: an error before any change
    result = plan_result("monitoring", MON, read(namespace=[], prometheuses=[], cluster_policy=[]), False, "stop.")
    assert result["failed"] is True and result["msg"].startswith("monitoring") and result["msg"].endswith("stop.")
    # monitoring_state absent: nothing judged
    absent = {**MON, "monitoring_state": "absent"}
    assert plan_result("monitoring", absent, read(namespace=[], prometheuses=[]), False, "")["findings"] == []


@pytest.mark.parametrize(
    ("mode", "live", "rebuilt"),
    [
        ("install", [KPS], True),  # the release's live Prometheus: built again from its selectors
        ("install", [], False),  # a first install in check mode: no Prometheus yet, the preflight's plan stands
        ("attach", [KPS], False),  # attach: nothing was released, the preflight's plan stands
    ],
)
def test_monitoring_release_phase(mode, live, rebuilt):
    previous = {"objects": ["the preflight's"], "findings": [{"id": "judged-before", "severity": "error"}]}
    variables = {**MON, "monitoring_mode": mode}
    queries = PLANS[("monitoring", "release")][0](variables)
    assert next(q for q in queries if q["key"] == "prometheuses")["skip"] is (mode != "install")
    result = plan_result("monitoring", variables, read(namespace=[], prometheuses=live), False, "", "release", previous)
    assert result["rebuilt"] is rebuilt and result["failed"] is False
    assert (result["objects"] == ["the preflight's"]) is not rebuilt
    if not rebuilt:
        assert result["findings"] == []  # judged in the preflight already


def test_the_landed_phase_judges_the_live_copies_of_what_the_plan_applied():
    from ansible_collections.gpuops.platform.plugins.action.role_plan import LANDED, landed_result, phases
    from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

    built = kq.plan(KUEUE, {"nodes": [NODE], "crds": []}, False)
    wanted = LANDED["kueue"][0](built)
    assert [o["kind"] for o in wanted] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    # one list call per kind and namespace
    assert [(q["kind"], q.get("namespace")) for q in _owned.landed_queries(wanted)] == [
        ("ResourceFlavor", None),
        ("ClusterQueue", None),
        ("LocalQueue", "research"),
    ]
    same = landed_result("kueue", built, {"objects": {"0": {"resources": wanted}}}, "")
    assert same["failed"] is False and same["findings"] == []
    drifted = [dict(o, spec={}) if o["kind"] == "ClusterQueue" else o for o in wanted]  # its spec pruned
    bad = landed_result("kueue", built, {"objects": {"0": {"resources": drifted}}}, "")
    assert bad["failed"] is True and [f["id"] for f in bad["findings"]] == ["kueue-object-not-landed"]
    assert "ClusterQueue" in bad["msg"]
    failed_read = landed_result("kueue", built, {"failed": True, "msg": "Unauthorized"}, "")
    assert failed_read["failed"] is True and "Unauthorized" in failed_read["msg"]
    assert phases("network_operator") == ["landed"] and "landed" in phases("monitoring")

"""The kueue role's rules as tables: quantities, flavors from the nodes' GPU products, ClusterQueues and LocalQueues
from teams, every input finding, capacity warnings, pruning, landing, admitted workloads, queue readiness and the
KAI conflict."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.kueue_objects import kueue_objects
from ansible_collections.gpuops.platform.plugins.filter.kueue_owned import kueue_owned
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue as kq
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue_quota as kqq
from ansible_collections.gpuops.platform.plugins.module_utils.common import _quantity as qty
from ansible_collections.gpuops.platform.plugins.module_utils.status import _readiness


def node(name: str, labels: dict[str, str], alloc: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": alloc}}


H100 = "NVIDIA-H100-80GB-HBM3"
NODES = [
    node("dgx-0", {"nvidia.com/gpu.product": H100}, {"nvidia.com/gpu": "8", "cpu": "224"}),
    node("dgx-1", {"nvidia.com/gpu.product": H100}, {"nvidia.com/gpu": "8", "cpu": "224"}),
    node("l40s-0", {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}, {"nvidia.com/gpu": "16", "cpu": "128"}),
    node("mi300-0", {"amd.com/gpu.product-name": "AMD_Instinct_MI300X"}, {"amd.com/gpu": "8"}),
    node("cpu-0", {"kubernetes.io/hostname": "cpu-0"}, {"cpu": "64", "memory": "251Gi"}),
]


def variables(**over: Any) -> dict[str, Any]:
    base = {
        "kueue_chart_version": "0.19.2",
        "kueue_integrations": ["batch/job"],
        "kueue_gpu_flavors": True,
        "kueue_flavors": [],
        "kueue_teams": [
            {
                "name": "research",
                "namespaces": ["research"],
                "quotas": [{"flavor": H100, "resources": {"nvidia.com/gpu": 12}}],
            }
        ],
    }
    return {**base, **over}


def ids(findings: list[dict[str, Any]]) -> list[str]:
    return [f["id"] for f in findings]


@pytest.mark.parametrize(
    ("value", "exact", "canonical"),
    [
        (8, Fraction(8), "8"),
        ("12", Fraction(12), "12"),
        ("500m", Fraction(1, 2), "500m"),
        ("0.5", Fraction(1, 2), "500m"),
        (2000, Fraction(2000), "2k"),
        ("64Gi", Fraction(64 * 2**30), "64Gi"),
        ("1024Mi", Fraction(2**30), "1Gi"),
        ("1536Mi", Fraction(1536 * 2**20), "1536Mi"),
        ("1e3", Fraction(1000), "1k"),
        (0, Fraction(0), "0"),
        ("-1", Fraction(-1), "-1"),
        ("ten", None, None),
        ("", None, None),
        (True, None, None),
        (None, None, None),
        ("12Gb", None, None),
    ],
)
def test_quantities(value, exact, canonical):
    assert qty.parse(value) == exact
    assert qty.canonical(value) == canonical


def test_flavors_from_gpu_products_with_their_nodes_and_gpus():
    flavors = kqq.gpu_flavors(NODES)
    assert [(f["name"], f["product"], f["nodes"], f["gpus"]) for f in flavors] == [
        ("amd-instinct-mi300x", "AMD_Instinct_MI300X", ["mi300-0"], {"amd.com/gpu": "8"}),
        ("nvidia-h100-80gb-hbm3", H100, ["dgx-0", "dgx-1"], {"nvidia.com/gpu": "16"}),
        ("nvidia-l40s-shared", "NVIDIA-L40S-SHARED", ["l40s-0"], {"nvidia.com/gpu": "16"}),
    ]
    assert flavors[0]["node_labels"] == {"amd.com/gpu.product-name": "AMD_Instinct_MI300X"}


def test_build_makes_flavors_queues_and_local_queues():
    built = kq.build(variables(), NODES)
    assert built["findings"] == []
    assert [rf["metadata"]["name"] for rf in built["resource_flavors"]] == [
        "amd-instinct-mi300x",
        "nvidia-h100-80gb-hbm3",
        "nvidia-l40s-shared",
    ]
    (cq,) = built["cluster_queues"]
    assert cq["metadata"] == {"name": "research", "labels": kq.OWNER_LABELS}
    assert cq["spec"] == {
        "namespaceSelector": {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["research"]}]
        },
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "nvidia-h100-80gb-hbm3", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "12"}]}
                ],
            }
        ],
    }
    assert built["local_queues"] == [
        {
            "apiVersion": kq.API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": "research", "namespace": "research", "labels": kq.OWNER_LABELS},
            "spec": {"clusterQueue": "research"},
        }
    ]
    assert built["namespaces"] == ["research"]
    assert built["wait_objects"] == [
        {"kind": "ClusterQueue", "name": "research"},
        {"kind": "LocalQueue", "name": "research", "namespace": "research"},
    ]


def test_team_with_cohort_limits_preemption_several_flavors_and_all_namespaces():
    team = {
        "name": "inference",
        "all_namespaces": True,
        "cohort": "ml",
        "local_queue": "serve",
        "queueing_strategy": "StrictFIFO",
        "preemption": {
            "reclaim_within_cohort": "Any",
            "within_cluster_queue": "LowerPriority",
            "borrow_within_cohort": {"policy": "LowerPriority", "max_priority_threshold": 100},
        },
        "quotas": [
            {"flavor": "nvidia-l40s-shared", "resources": {"nvidia.com/gpu": 4, "cpu": "16"}},
            {
                "flavor": "nvidia-h100-80gb-hbm3",
                "resources": {"nvidia.com/gpu": {"nominal": 8, "borrowing_limit": 4, "lending_limit": 2}},
            },
        ],
    }
    built = kq.build(variables(kueue_teams=[team]), NODES)
    assert built["findings"] == []
    (cq,) = built["cluster_queues"]
    assert cq["spec"]["namespaceSelector"] == {}  # all namespaces, never nil
    assert cq["spec"]["cohortName"] == "ml"
    assert cq["spec"]["queueingStrategy"] == "StrictFIFO"
    assert cq["spec"]["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
    }
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "nvidia.com/gpu"]  # sorted, every flavor lists each
    assert group["flavors"] == [
        {
            "name": "nvidia-l40s-shared",
            "resources": [{"name": "cpu", "nominalQuota": "16"}, {"name": "nvidia.com/gpu", "nominalQuota": "4"}],
        },
        {
            "name": "nvidia-h100-80gb-hbm3",
            "resources": [
                {"name": "cpu", "nominalQuota": "0"},
                {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4", "lendingLimit": "2"},
            ],
        },
    ]
    assert built["local_queues"] == []  # all namespaces: no namespace list to put LocalQueues in


def team(**over: Any) -> dict[str, Any]:
    return {
        "name": "research",
        "namespaces": ["research"],
        "quotas": [{"flavor": H100, "resources": {"nvidia.com/gpu": 8}}],
        **over,
    }


@pytest.mark.parametrize(
    ("teams", "flavors", "expect", "evidence"),
    [
        (
            [team(quotas=[{"flavor": "NVIDIA-B200", "resources": {"nvidia.com/gpu": 8}}])],
            [],
            "kueue-flavor-unknown",
            "nvidia-h100-80gb-hbm3 (GPU product NVIDIA-H100-80GB-HBM3",
        ),
        (
            [team(quotas=[{"flavor": "nvidia-l40s", "resources": {"nvidia.com/gpu": 1}}])],
            [],
            None,
            None,
        ),  # base product of -SHARED
        ([team(quotas=[{"flavor": H100, "resources": {}}])], [], "kueue-quota-invalid", "resources: {}"),
        (
            [team(quotas=[{"flavor": H100, "resources": {"nvidia.com/gpu": "lots"}}])],
            [],
            "kueue-quota-invalid",
            "not a non-negative quantity: nominal",
        ),
        ([team(quotas=[{"flavor": H100, "resources": {"nvidia.com/gpu": -1}}])], [], "kueue-quota-invalid", "nominal"),
        (
            [team(quotas=[{"flavor": H100, "resources": {"nvidia.com/gpu": {"nominal": 8, "burst": 2}}}])],
            [],
            "kueue-quota-invalid",
            "unknown keys: burst",
        ),
        (
            [team(quotas=[{"flavor": H100, "resources": {"nvidia.com/gpu": {"nominal": 8, "borrowing_limit": 2}}}])],
            [],
            "kueue-limit-without-cohort",
            "cohort: not set",
        ),
        (
            [
                team(
                    cohort="ml",
                    quotas=[{"flavor": H100, "resources": {"nvidia.com/gpu": {"nominal": 8, "lending_limit": 9}}}],
                )
            ],
            [],
            "kueue-lending-above-nominal",
            "lending_limit 9 > nominal 8",
        ),
        (
            [
                team(
                    quotas=[
                        {"flavor": H100, "resources": {"nvidia.com/gpu": 1}},
                        {"flavor": "nvidia-h100-80gb-hbm3", "resources": {"nvidia.com/gpu": 1}},
                    ]
                )
            ],
            [],
            "kueue-flavor-repeated",
            "earlier quota",
        ),
        ([team(name="Research")], [], "kueue-team-name-invalid", "kueue_teams[0].name: Research"),
        ([team(cohort="ML!")], [], "kueue-cohort-invalid", "ML!"),
        ([team(namespaces=["Team_A"])], [], "kueue-namespace-invalid", "Team_A"),
        ([team(namespaces=[])], [], "kueue-team-selects-no-namespace", "no namespaces and all_namespaces false"),
        ([team(queueing_strategy="LIFO")], [], "kueue-queueing-strategy-invalid", "LIFO"),
        ([team(preemption={"reclaim_within_cohort": "Always"})], [], "kueue-preemption-invalid", "Always"),
        (
            [team(preemption={"borrow_within_cohort": "LowerPriority"})],
            [],
            "kueue-preemption-invalid",
            "reclaim_within_cohort Never",
        ),
        ([team(), team()], [], "kueue-team-duplicate", "kueue_teams[1].name: research"),
        ([team(), team(name="other")], [], "kueue-local-queue-claimed", None),
        (
            [team(name="other", local_queue="q"), team(local_queue="q")],
            [],
            "kueue-local-queue-claimed",
            "research/q (also other)",
        ),
        ([team()], [{"name": "Bad Name"}], "kueue-flavor-name-invalid", "Bad Name"),
        ([team()], [{"name": "nvidia-h100-80gb-hbm3"}], "kueue-flavor-duplicate", "flavor of a GPU product"),
        (
            [team(quotas=[{"flavor": H100, "resources": {"nvidia.com/gpu": 20}}])],
            [],
            "kueue-quota-above-capacity",
            "sum to 20 (research 20), the flavor's 2 node(s) have 16",
        ),
        ("bad", [], None, None),
    ],
)
def test_input_findings(teams, flavors, expect, evidence):
    if teams == "bad":
        teams = ["not a team"]
        expect, evidence = "kueue-team-invalid", "kueue_teams[0]: not a team"
    if expect == "kueue-local-queue-claimed" and evidence is None:
        teams[1]["namespaces"] = ["research"]
        teams[1]["local_queue"] = "research"
        evidence = "research/research (also research)"
    built = kq.build(variables(kueue_teams=teams, kueue_flavors=flavors), NODES)
    if expect is None:
        assert built["findings"] == []
        return
    found = [f for f in built["findings"] if f["id"] == expect]
    assert found, built["findings"]
    text = "; ".join(found[0]["evidence"])
    assert evidence in text
    assert "'" not in text.replace("'s ", "")  # values, not Python reprs
    assert found[0]["severity"] == ("warning" if expect == "kueue-quota-above-capacity" else "error")
    assert found[0]["fix"] and found[0]["cause"]
    if found[0]["severity"] == "error":
        assert not any(
            cq["metadata"]["name"] == teams[-1].get("name") and expect.startswith("kueue-team-duplicate")
            for cq in built["cluster_queues"][1:]
        )


def test_unknown_integration_and_no_gpu_flavors():
    built = kq.build(variables(kueue_integrations=["batch/job", "kubeflow.org/nope"], kueue_gpu_flavors=False), NODES)
    assert ids(built["findings"]) == ["kueue-integration-unknown", "kueue-flavor-unknown"]
    assert built["findings"][1]["evidence"][1] == "flavors: none: kueue_gpu_flavors is false and kueue_flavors is empty"
    assert kq.build(variables(), [])["findings"][0]["evidence"][1].startswith("flavors: none: no node carries")


def test_chart_values_pin_the_image_and_carry_the_configuration():
    import json

    values = kq.chart_values(
        variables(kueue_integrations=["batch/job", "pod"], kueue_manage_jobs_without_queue_name=True)
    )
    assert values["controllerManager"]["manager"]["image"] == {
        "repository": "registry.k8s.io/kueue/kueue",
        "pullPolicy": "IfNotPresent",
        "tag": "v0.19.2",
    }
    conf = json.loads(values["managerConfig"]["controllerManagerConfigYaml"])
    assert conf["integrations"] == {"frameworks": ["batch/job", "pod"]}
    assert conf["manageJobsWithoutQueueName"] is True
    assert conf["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"


def test_the_manager_configuration_keeps_the_charts_defaults():
    """The chart's whole controllerManagerConfigYaml is one value: the role's must carry every key of the pinned
    chart's default (UPSTREAM_MANAGER_CONFIG, which tests/unit/charts/test_checked_charts.py holds to upstream's
    values.yaml), with only the role's keys changed."""
    import json

    default = kq.UPSTREAM_MANAGER_CONFIG
    conf = json.loads(
        kq.chart_values(variables(kueue_integrations=["pod"]))["managerConfig"]["controllerManagerConfigYaml"]
    )
    assert conf["clientConnection"] == {"qps": 300, "burst": 500}
    assert conf["controller"]["groupKindConcurrency"]["Workload.kueue.x-k8s.io"] == 10
    role_keys = {"integrations", "manageJobsWithoutQueueName"}
    assert {k: v for k, v in conf.items() if k not in role_keys} == {
        k: v for k, v in default.items() if k not in role_keys
    }


LIVE = [
    {"apiVersion": kq.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "old", "labels": kq.OWNER_LABELS}},
    {"apiVersion": kq.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": "gone", "labels": kq.OWNER_LABELS}},
    {
        "apiVersion": kq.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": "gone", "namespace": "t", "labels": kq.OWNER_LABELS},
    },
    {"apiVersion": kq.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": "hand-made"}},
    {"apiVersion": kq.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": "research", "labels": kq.OWNER_LABELS}},
]


def test_prune_only_labelled_objects_the_variables_dropped_local_queues_first():
    built = kq.build(variables(), NODES)
    wanted = built["resource_flavors"] + built["cluster_queues"] + built["local_queues"]
    out = kueue_owned(wanted, LIVE)
    assert [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in out] == [
        ("LocalQueue", "t", "gone"),
        ("ClusterQueue", None, "gone"),
        ("ResourceFlavor", None, "old"),
    ]
    # absent: everything labelled, nothing hand-made
    assert len(kueue_owned([], LIVE)) == 4


def test_landing_compares_canonical_quantities_strictly():
    built = kq.build(variables(), NODES)
    live = copy.deepcopy(built["cluster_queues"])
    assert kueue_owned(built["cluster_queues"], live, "landed") == []
    live[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 12  # a number is not "12"
    (finding,) = kueue_owned(built["cluster_queues"], live, "landed")
    assert finding["id"] == "kueue-object-not-landed"
    assert finding["evidence"] == ['spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: wanted "12", live 12']
    assert kueue_owned(built["cluster_queues"], [], "landed")[0]["evidence"] == [
        "ClusterQueue research: not found after it was applied"
    ]


def wl(name: str, cq: str, admitted: str = "True", finished: str | None = None) -> dict[str, Any]:
    conds = [{"type": "Admitted", "status": admitted}] + (
        [{"type": "Finished", "status": finished}] if finished else []
    )
    return {
        "metadata": {"name": name, "namespace": "research"},
        "status": {"admission": {"clusterQueue": cq}, "conditions": conds},
    }


@pytest.mark.parametrize(
    ("workloads", "force", "expect"),
    [
        ([], False, []),
        ([wl("a", "research")], False, ["error"]),
        ([wl("a", "research")], True, ["warning"]),
        ([wl("a", "research", finished="True")], False, []),
        ([wl("a", "research", admitted="False")], False, []),
        ([wl("a", "other")], False, []),
    ],
)
def test_admitted_workloads_stop_the_removal(workloads, force, expect):
    cqs = [{"metadata": {"name": "research"}}]
    out = kueue_owned(cqs, workloads, "admitted", force)
    assert [f["severity"] for f in out] == expect
    if out:
        assert out[0]["evidence"] == ["1 admitted workload(s): research/a (ClusterQueue research)"]
        assert "kueue_force" in out[0]["fix"]
        assert out[0]["object"]["names"] == ["research"]  # the queues the role drains with kueue_force


@pytest.mark.parametrize(
    ("status", "unmet"),
    [
        ({"conditions": [{"type": "Active", "status": "True"}]}, None),
        (
            {
                "conditions": [
                    {
                        "type": "Active",
                        "status": "False",
                        "reason": "FlavorNotFound",
                        "message": "Can't admit new workloads: references missing ResourceFlavor(s): h100",
                    }
                ]
            },
            "Active is False (FlavorNotFound: Can't admit new workloads: references missing ResourceFlavor(s): h100)",
        ),
        ({}, "no Active condition yet (Kueue has not reconciled it: is the controller running?)"),
    ],
)
def test_queue_readiness(status, unmet):
    assert kq.queue_ready({"status": status}) == unmet
    for kind in ("ClusterQueue", "LocalQueue"):
        assert _readiness.KINDS[kind].ready({"status": status}) == unmet
    assert _readiness.KINDS["LocalQueue"].namespaced and not _readiness.KINDS["ClusterQueue"].namespaced


def test_old_kai_next_to_kueue_is_an_error():
    assert kq.coexistence_findings(["clusterqueues.kueue.x-k8s.io"]) == []
    (finding,) = kq.coexistence_findings(["queues.scheduling.run.ai", "clusterqueues.kueue.x-k8s.io"])
    assert finding["id"] == "kueue-kai-topology-conflict"
    built = kueue_objects(variables(), NODES, ["podgroups.scheduling.run.ai"])
    assert ids(built["findings"]) == ["kueue-kai-topology-conflict"]
    # KAI v0.11.0 and later (v0.17.0 pinned) have their own kai.scheduler Topology: no conflict
    assert kq.coexistence_findings(["queues.scheduling.run.ai", "topologies.kai.scheduler"]) == []


@pytest.mark.parametrize(("args", "match"), [(("x", []), "variables as a dict"), (({}, "x"), "nodes as a list")])
def test_filter_input_errors(args, match):
    with pytest.raises(AnsibleFilterError, match=match):
        kueue_objects(*args)
    with pytest.raises(AnsibleFilterError, match="check must be"):
        kueue_owned([], [], "other")


def test_check_mode_before_gpu_feature_discovery_warns_and_leaves_the_team_out():
    bare = [node("dgx-0", {}, {"cpu": "224"})]  # no GPU product label yet: the GPU Operator has not run
    built = kq.build(variables(), bare, check_mode=True)
    assert [(f["id"], f["severity"]) for f in built["findings"]] == [("kueue-flavor-unknown", "warning")]
    assert "check mode before the GPU Operator" in built["findings"][0]["cause"]
    assert built["cluster_queues"] == [] and built["local_queues"] == []
    # the real run (or check mode on a cluster that has GPU labels) keeps it an error
    assert kq.build(variables(), bare)["findings"][0]["severity"] == "error"
    with_labels = kq.build(
        variables(kueue_teams=[team(quotas=[{"flavor": "NVIDIA-B200", "resources": {"nvidia.com/gpu": 1}}])]),
        NODES,
        check_mode=True,
    )
    assert [(f["id"], f["severity"]) for f in with_labels["findings"]] == [("kueue-flavor-unknown", "error")]


@pytest.mark.parametrize(
    ("resources", "cohort", "want"),
    [
        ({"nvidia.com/gpu": -1}, None, "kueue-quota-invalid"),
        ({"nvidia.com/gpu": "16x"}, None, "kueue-quota-invalid"),
        ({"nvidia.com/gpu": {"nominal": 2, "borrowing_limit": 1}}, None, "kueue-limit-without-cohort"),
        ({"nvidia.com/gpu": {"nominal": 2, "lending_limit": 4}}, "all", "kueue-lending-above-nominal"),
        ({"nvidia.com/gpu": {"nominal": 2, "borrowing_limit": -1}}, "all", "kueue-quota-invalid"),
    ],
)
def test_a_quota_on_a_flavor_not_known_yet_is_still_judged(resources, cohort, want):
    """The run's plan (and --check) before the GPU Operator labelled the nodes: the flavor is a warning, the team is
    left out, and its quantities, limits and cohort are errors all the same - the run stops before its first change."""
    bare = [node("dgx-0", {}, {"cpu": "224"})]
    quota = {"flavor": "NVIDIA-H100-80GB-HBM3", "resources": resources}
    built = kq.build(variables(kueue_teams=[team(quotas=[quota], cohort=cohort)]), bare, check_mode=True)
    assert [(f["id"], f["severity"]) for f in built["findings"]] == [
        ("kueue-flavor-unknown", "warning"),
        (want, "error"),
    ]
    assert built["cluster_queues"] == []

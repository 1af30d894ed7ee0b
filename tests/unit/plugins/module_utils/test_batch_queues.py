"""The volcano and kai_scheduler roles' rules (_volcano, _kai, _queue_tree) and their filters, as tables."""

from __future__ import annotations

from fractions import Fraction

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.batch_queues import batch_queues
from ansible_collections.gpuops.platform.plugins.filter.batch_queues_owned import batch_queues_owned
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kai, _queue_tree, _volcano

NODES = [
    {"metadata": {"name": f"gpu-{i}"}, "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64"}}}
    for i in range(2)
]


def ids(findings):
    return sorted(f["id"] for f in findings)


def errors(findings):
    return sorted(f["id"] for f in findings if f["severity"] == "error")


def vvars(queues, **kw):
    return {
        "volcano_chart_version": "1.15.1",
        "volcano_scheduler_name": "volcano",
        "volcano_enabled_admissions": ["/jobs/mutate", "/queues/validate"],
        "volcano_queues": queues,
        **kw,
    }


def kvars(queues, **kw):
    return {"kai_scheduler_chart_version": "v0.17.0", "kai_scheduler_queues": queues, **kw}


# --- the tree ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parents", "external", "depth", "expect"),
    [
        ({"a": None, "b": "a"}, [], 5, []),
        ({"a": "root"}, ["root"], 5, []),
        ({"a": "nope"}, [], 5, ["x-queue-parent-unknown"]),
        ({"a": "b", "b": "a"}, [], 5, ["x-queue-cycle"]),  # one cycle, one finding
        ({"a": "a"}, [], 5, ["x-queue-cycle"]),
        ({"a": None, "b": "a", "c": "b"}, [], 2, ["x-queue-too-deep"]),
        ({"a": None, "b": "a", "c": "b"}, [], 3, []),
        ({"a": "default-parent-queue"}, ["default-parent-queue"], 1, ["x-queue-too-deep"]),
    ],
)
def test_parents(parents, external, depth, expect):
    assert ids(_queue_tree.parent_findings("x", "var", "Queue", parents, external, depth)) == expect


F = Fraction


@pytest.mark.parametrize(
    ("amounts", "missing", "expect"),
    [
        ({"p": {"gpu": F(8)}, "a": {"gpu": F(4)}, "b": {"gpu": F(4)}}, F(0), []),
        ({"p": {"gpu": F(8)}, "a": {"gpu": F(6)}, "b": {"gpu": F(4)}}, F(0), ["x-queue-children-exceed-parent"]),
        ({"p": {}, "a": {"gpu": F(1)}}, F(0), ["x-queue-children-exceed-parent"]),  # absent dimension is zero
        ({"p": {"gpu": None}, "a": {"gpu": F(100)}}, F(0), []),  # unlimited parent
        ({"p": {"gpu": F(8)}, "a": {"gpu": None}}, F(0), ["x-queue-children-exceed-parent"]),  # unlimited child
        ({"p": {}, "a": {"gpu": F(1)}}, None, []),
    ],
)
def test_children_sum(amounts, missing, expect):
    parents = {"p": None, "a": "p", "b": "p"}
    found = _queue_tree.sum_findings("x", "Queue", "guarantee", parents, amounts, missing)
    assert ids(found) == expect
    for f in found:
        assert f["object"]["name"] == "p"
        assert "sum to" in f["evidence"][0]


def test_caps_and_delete_order():
    parents = {"p": None, "a": "p", "b": "a"}
    caps = {"p": {"gpu": F(8)}, "a": {}, "b": {"gpu": F(16)}}
    (f,) = _queue_tree.cap_findings("x", "Queue", "capability", parents, caps)
    assert f["object"]["name"] == "b" and "ancestor p has 8" in f["evidence"][0]
    assert _queue_tree.cap_findings("x", "Queue", "capability", parents, {"p": {"gpu": F(8)}, "b": {"gpu": F(8)}}) == []
    live = [{"metadata": {"name": n}, "spec": {"parent": p}} for n, p in parents.items()]
    objs = [{"metadata": {"name": n}} for n in ("p", "a", "b")]
    assert [o["metadata"]["name"] for o in _queue_tree.children_first(objs, live, "parent")] == ["b", "a", "p"]


TREE = _queue_tree.Tree("x", "x_queues", "{name: a}", ("root",), 5)


def _one(q, name, where, findings):
    if q.get("bad"):
        findings.append(_queue_tree.finding("x-queue-bad", "error", "Queue", name, [where], "bad", "fix it"))
        return None
    return {"metadata": {"name": name}}, {"parent": q.get("parent")}


@pytest.mark.parametrize(
    ("queues", "reserved", "taken", "names", "expect"),
    [
        ([{"name": "a"}, {"name": "b", "parent": "a"}], None, None, ["a", "b"], []),
        (None, None, None, [], []),
        (["a"], None, None, [], ["x-queue-invalid"]),
        ([{"weight": 1}], None, None, [], ["x-queue-invalid"]),
        ([{"name": "Bad_Name"}], None, None, [], ["x-queue-name-invalid"]),
        ([{"name": "a" * 254}], None, None, [], ["x-queue-name-invalid"]),
        ([{"name": "a"}, {"name": "a"}], None, None, ["a"], ["x-queue-duplicate"]),
        ([{"name": "root"}], {"root": ("the scheduler's", "rename")}, None, [], ["x-queue-reserved"]),
        ([{"name": "dq"}], None, {"dq": ("the chart makes it", ", or turn it off")}, [], ["x-queue-duplicate"]),
        ([{"name": "a", "bad": True}], None, None, [], ["x-queue-bad"]),
    ],
)
def test_collect(queues, reserved, taken, names, expect):
    objs, facts, found = _queue_tree.collect(TREE, queues, _one, reserved, taken)
    assert [o["metadata"]["name"] for o in objs] == names and sorted(facts) == names
    assert ids(found) == expect
    for f in found:
        assert f["evidence"] and f["cause"] and f["fix"]
    if taken and expect:
        assert found[0]["evidence"][1] == "the chart makes it" and found[0]["fix"] == "rename it, or turn it off"


ORDERS = (
    _queue_tree.Order(
        "low", "mid", "x-low-above-mid", "c", "raise mid[{res}] above {low}", ("unset", "set mid[{res}]")
    ),
    _queue_tree.Order("low", "high", "x-low-above-high", "c", "raise high[{res}]"),
    _queue_tree.Order("mid", "high", "x-mid-above-high", "c", "raise high[{res}]"),
)


@pytest.mark.parametrize(
    ("amounts", "expect"),
    [
        ({"low": {"g": F(1)}, "mid": {"g": F(2)}, "high": {"g": F(3)}}, []),
        ({"low": {"g": F(2)}, "mid": {"g": F(2)}, "high": {"g": F(2)}}, []),  # equal is allowed
        ({"low": {"g": F(3)}, "mid": {"g": F(2)}, "high": {"g": F(4)}}, ["x-low-above-mid"]),
        # low above mid is reported once: not again against high
        ({"low": {"g": F(3)}, "mid": {"g": F(2)}, "high": {"g": F(1)}}, ["x-low-above-mid", "x-mid-above-high"]),
        ({"low": {"g": F(2)}, "mid": {"g": F(3)}, "high": {"g": F(1)}}, ["x-low-above-high", "x-mid-above-high"]),
        ({"low": {"g": F(2)}, "high": {"g": F(1)}}, ["x-low-above-high", "x-low-above-mid"]),  # unset, then high
        ({"low": {"g": None}, "mid": {"g": F(2)}}, ["x-low-above-mid"]),  # unlimited above a finite amount
        ({"low": {"g": F(9)}, "mid": {"g": None}, "high": {}}, []),  # unlimited high, absent high
        ({"mid": {"g": F(2)}, "high": {"h": F(1)}}, []),  # different resources
    ],
)
def test_order_findings(amounts, expect):
    found = _queue_tree.order_findings("Queue", "q", amounts, ORDERS)
    assert ids(found) == expect
    by_id = {f["id"]: f for f in found}
    if "x-low-above-mid" in by_id and "not set" not in by_id["x-low-above-mid"]["evidence"][0]:
        assert by_id["x-low-above-mid"]["fix"].startswith("raise mid[g] above ")


@pytest.mark.parametrize(
    ("given", "expect_fix"),
    [
        ({"gpu": 1, "cpu": 2}, None),
        ({}, None),
        ({"gpus": 1}, "gpus: did you mean gpu? use the keys gpu, cpu, memory"),
        ({"nvidia.com/gpu": 1}, "use the keys gpu, cpu, memory"),
        ([1], "write r as a mapping"),
    ],
)
def test_unknown_findings(given, expect_fix):
    found = _queue_tree.unknown_findings("x-unknown", "Queue", "q", "r", given, ("gpu", "cpu", "memory"), "cause")
    assert [f["fix"] for f in found] == ([] if expect_fix is None else [expect_fix])


@pytest.mark.parametrize(
    ("parents", "amounts", "have", "expect"),
    [
        ({"a": None, "b": None}, {"a": {"g": F(8)}, "b": {"g": F(8)}}, {"g": F(16)}, []),
        ({"a": None, "b": None}, {"a": {"g": F(8)}, "b": {"g": F(9)}}, {"g": F(16)}, ["g: a 8, b 9 sum to 17; 16"]),
        ({"a": None, "b": "a"}, {"a": {"g": F(8)}, "b": {"g": F(9)}}, {"g": F(8)}, []),  # children are not counted
        ({"a": None}, {"a": {"g": None}}, {}, []),  # unlimited is not counted
        ({"a": None}, {"a": {"h": F(1)}}, {"g": F(8)}, ["h: a 1 sum to 1; 0"]),  # a resource no node has
    ],
)
def test_capacity_findings(parents, amounts, have, expect):
    found = _queue_tree.capacity_findings("x-cap", "Queue", "guarantee", parents, amounts, have, 2)
    assert all(f["severity"] == "warning" for f in found)
    got = [f["evidence"][0] for f in found]
    assert len(got) == len(expect)
    for line, want in zip(got, expect, strict=True):
        res, rest = want.split(": ", 1)
        parts, have_n = rest.split("; ")
        assert line == f"guarantee[{res}]: {parts}; the 2 node(s) have {have_n} allocatable"


# --- Volcano ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("queues", "extra", "expect"),
    [
        ([{"name": "research", "weight": 2, "capability": {"nvidia.com/gpu": 8}}], {}, []),
        ([{"name": "default"}], {}, ["volcano-queue-reserved"]),
        ([{"name": "root"}], {}, ["volcano-queue-reserved"]),
        ([{"name": "Bad_Name"}], {}, ["volcano-queue-name-invalid"]),
        ([{"name": "a"}, {"name": "a"}], {}, ["volcano-queue-duplicate"]),
        ([{"name": "a", "weight": 0}], {}, ["volcano-queue-weight-invalid"]),
        ([{"name": "a", "capability": {"nvidia.com/gpu": "x"}}], {}, ["volcano-queue-resources-invalid"]),
        (
            [{"name": "a", "deserved": {"nvidia.com/gpu": 4}, "guarantee": {"nvidia.com/gpu": 6}}],
            {},
            ["volcano-queue-guarantee-above-deserved"],
        ),
        (
            [{"name": "a", "capability": {"nvidia.com/gpu": 2}, "deserved": {"nvidia.com/gpu": 4}}],
            {},
            ["volcano-queue-deserved-above-capability"],
        ),
        (  # the case: capability 2, guarantee 4, no deserved (proportion plugin): no deserved share either
            [{"name": "a", "capability": {"nvidia.com/gpu": 2}, "guarantee": {"nvidia.com/gpu": 4}}],
            {},
            ["volcano-queue-guarantee-above-capability", "volcano-queue-guarantee-above-deserved"],
        ),
        (  # Volcano's webhook (1.15.1) refuses a guarantee without a deserved share, with weights too
            [{"name": "a", "weight": 2, "capability": {"nvidia.com/gpu": 4}, "guarantee": {"nvidia.com/gpu": 4}}],
            {},
            ["volcano-queue-guarantee-above-deserved"],
        ),
        (
            [
                {
                    "name": "a",
                    "capability": {"nvidia.com/gpu": 4},
                    "deserved": {"nvidia.com/gpu": 4},
                    "guarantee": {"nvidia.com/gpu": 4},
                }
            ],
            {},
            [],
        ),
        ([{"name": "a", "parent": "p"}], {}, ["volcano-queue-parent-unknown"]),
        ([{"name": "p", "weight": 3}, {"name": "a", "parent": "p"}], {}, ["volcano-queue-weight-ignored"]),
        (
            [
                {"name": "p", "deserved": {"nvidia.com/gpu": 8}, "guarantee": {"nvidia.com/gpu": 8}},
                {"name": "a", "parent": "p", "deserved": {"nvidia.com/gpu": 6}, "guarantee": {"nvidia.com/gpu": 4}},
                {"name": "b", "parent": "p", "deserved": {"nvidia.com/gpu": 6}, "guarantee": {"nvidia.com/gpu": 6}},
            ],
            {},
            ["volcano-queue-children-exceed-parent", "volcano-queue-children-exceed-parent"],
        ),
        (
            [
                {"name": "p", "capability": {"nvidia.com/gpu": 8}},
                {"name": "a", "parent": "p", "capability": {"nvidia.com/gpu": 9}},
            ],
            {},
            ["volcano-queue-cap-above-ancestor"],
        ),
        ([], {"volcano_scheduler_name": "default-scheduler"}, ["volcano-claims-default-scheduler"]),
        ([], {"volcano_enabled_admissions": ["/nope/validate"]}, ["volcano-admission-unknown"]),
    ],
)
def test_volcano_rules(queues, extra, expect):
    built = _volcano.build(vvars(queues, **extra), NODES)
    assert errors(built["findings"]) == expect
    for f in built["findings"]:
        assert f["evidence"] and f["cause"] and f["fix"]


def test_volcano_objects_and_scheduler_config():
    built = batch_queues(
        vvars([{"name": "research", "weight": 2, "capability": {"nvidia.com/gpu": 8, "memory": "1024Mi"}}]),
        "volcano",
        NODES,
    )
    (q,) = built["queues"]
    assert q["apiVersion"] == "scheduling.volcano.sh/v1beta1" and q["kind"] == "Queue"
    assert q["spec"] == {
        "reclaimable": True,
        "weight": 2,
        "capability": {"memory": "1073741824", "nvidia.com/gpu": "8"},
    }
    assert q["metadata"]["labels"]["gpuops.platform/role"] == "volcano"
    assert built["plugin"] == "proportion"
    custom = built["chart_values"]["custom"]
    assert custom["enabled_admissions"] == "/jobs/mutate,/queues/validate"
    assert built["chart_values"]["basic"] == {"image_tag_version": "v1.15.1"}
    conf = yaml.safe_load(custom["scheduler_config_override"])
    assert conf["actions"] == "enqueue, allocate, backfill"
    assert "proportion" in [p["name"] for t in conf["tiers"] for p in t["plugins"]]
    # a parent (or deserved) switches to the capacity plugin with the hierarchy on
    tree = batch_queues(
        vvars([{"name": "p", "deserved": {"cpu": 8}}, {"name": "a", "parent": "p", "deserved": {"cpu": 4}}]),
        "volcano",
    )
    conf = yaml.safe_load(tree["chart_values"]["custom"]["scheduler_config_override"])
    plugins = {p["name"]: p for t in conf["tiers"] for p in t["plugins"]}
    assert tree["plugin"] == "capacity" and plugins["capacity"]["enableHierarchy"] is True
    assert "proportion" not in plugins and conf["actions"].endswith("reclaim")
    assert tree["findings"] == []


def test_volcano_capacity_warning():
    built = _volcano.build(
        vvars([{"name": "a", "deserved": {"nvidia.com/gpu": 20}, "guarantee": {"nvidia.com/gpu": 20}}]), NODES
    )
    (f,) = built["findings"]
    assert f["id"] == "volcano-guarantee-above-capacity" and f["severity"] == "warning"
    assert "sum to 20" in f["evidence"][0] and "have 16 allocatable" in f["evidence"][0]


def test_volcano_admitted():
    queues = [{"metadata": {"name": "research"}}]
    pgs = [
        {"metadata": {"namespace": "ml", "name": "g1"}, "spec": {"queue": "research"}, "status": {"phase": "Running"}},
        {"metadata": {"namespace": "ml", "name": "g2"}, "spec": {"queue": "research"}, "status": {"phase": "Pending"}},
        {"metadata": {"namespace": "ml", "name": "g3"}, "spec": {}, "status": {"phase": "Running"}},  # default queue
    ]
    (f,) = batch_queues_owned(queues, pgs, "volcano", "admitted")
    assert f["severity"] == "error" and f["object"]["names"] == ["research"] and "ml/g1" in f["evidence"][0]
    assert "g2" not in f["evidence"][0] and "g3" not in f["evidence"][0]
    assert batch_queues_owned(queues, pgs, "volcano", "admitted", True)[0]["severity"] == "warning"
    assert batch_queues_owned(queues, pgs[1:], "volcano", "admitted") == []


# --- KAI Scheduler ----------------------------------------------------------------------------------------------

GPU8 = {"gpu": {"quota": 8, "limit": 16}}


@pytest.mark.parametrize(
    ("queues", "extra", "expect"),
    [
        ([{"name": "ml", "resources": GPU8}], {}, []),
        ([{"name": "ml", "resources": {"gpu": {"quota": 8, "limit": 4}}}], {}, ["kai-queue-limit-below-quota"]),
        ([{"name": "ml", "resources": {"gpu": {"quota": -1, "limit": 4}}}], {}, ["kai-queue-limit-below-quota"]),
        ([{"name": "ml", "resources": {"gpu": {"quota": -1}}}], {}, []),
        ([{"name": "ml", "resources": {"gpu": {"quota": -2}}}], {}, ["kai-queue-amount-invalid"]),
        ([{"name": "ml", "resources": {"gpu": {"quota": "lots"}}}], {}, ["kai-queue-amount-invalid"]),
        ([{"name": "ml", "resources": {"nvidia.com/gpu": {"quota": 1}}}], {}, ["kai-queue-resource-unknown"]),
        ([{"name": "default-queue"}], {}, ["kai-queue-duplicate"]),
        ([{"name": "default-queue"}], {"kai_scheduler_default_queues": False}, []),
        ([{"name": "a", "parent": "nope"}], {}, ["kai-queue-parent-unknown"]),
        ([{"name": "a", "parent": "default-parent-queue"}], {}, []),
        (
            [
                {"name": "ml", "resources": GPU8},
                {"name": "research", "parent": "ml", "resources": {"gpu": {"quota": 6, "limit": 8}}},
                {"name": "serving", "parent": "ml", "resources": {"gpu": {"quota": 4, "limit": 8}}},
            ],
            {},
            ["kai-queue-children-exceed-parent"],
        ),
        (
            [
                {"name": "ml", "resources": GPU8},
                {"name": "research", "parent": "ml", "resources": {"gpu": {"quota": 4, "limit": 32}}},
            ],
            {},
            ["kai-queue-cap-above-ancestor"],
        ),
        (
            [
                {"name": "ml", "resources": {"gpu": {"quota": -1}}},
                {"name": "research", "parent": "ml", "resources": {"gpu": {"quota": 400}}},
            ],
            {},
            [],
        ),
    ],
)
def test_kai_rules(queues, extra, expect):
    built = _kai.build(kvars(queues, **extra), [])
    assert errors(built["findings"]) == expect
    for f in built["findings"]:
        assert f["evidence"] and f["cause"] and f["fix"]


def test_kai_children_sum_names_the_numbers():
    built = _kai.build(
        kvars(
            [
                {"name": "ml", "resources": GPU8},
                {"name": "research", "parent": "ml", "resources": {"gpu": {"quota": 6, "limit": 8}}},
                {"name": "serving", "parent": "ml", "resources": {"gpu": {"quota": 4, "limit": 8}}},
            ]
        ),
        [],
    )
    (f,) = [f for f in built["findings"] if f["severity"] == "error"]
    assert f["object"] == {"kind": "Queue", "name": "ml"}
    assert f["evidence"] == ["quota[gpu]: children research 6 GPU, serving 4 GPU sum to 10 GPU; ml has 8 GPU"]


def test_kai_objects_units_and_leaves():
    built = batch_queues(
        kvars(
            [
                {
                    "name": "ml",
                    "resources": {"gpu": {"quota": 8, "limit": -1}, "cpu": {"quota": "64"}, "memory": {"quota": -1}},
                },
                {
                    "name": "research",
                    "parent": "ml",
                    "priority": 200,
                    "reclaim_min_runtime": "10m",
                    "resources": {"gpu": {"quota": 0.5, "over_quota_weight": 2}, "memory": {"quota": "256Gi"}},
                },
            ]
        ),
        "kai_scheduler",
        NODES,
    )
    ml, research = built["queues"]
    assert ml["apiVersion"] == "scheduling.run.ai/v2"
    assert ml["spec"]["resources"]["cpu"] == {"quota": 64000, "limit": -1, "overQuotaWeight": 1}
    assert research["spec"]["parentQueue"] == "ml" and research["spec"]["priority"] == 200
    assert research["spec"]["reclaimMinRuntime"] == "10m"
    assert research["spec"]["resources"]["gpu"] == {"quota": 0.5, "limit": -1, "overQuotaWeight": 2}
    assert research["spec"]["resources"]["memory"]["quota"] == pytest.approx(274877.906944)
    assert built["leaf_queues"] == ["research"]
    assert built["chart_values"] == {
        "global": {"registry": "ghcr.io/kai-scheduler/kai-scheduler", "gpuSharing": False},
        "defaultQueue": {"createDefaultQueue": True},
    }
    assert built["findings"] == []


def test_kai_capacity_and_admitted():
    built = _kai.build(kvars([{"name": "ml", "resources": {"gpu": {"quota": 24}}}]), NODES)
    (f,) = built["findings"]
    assert f["id"] == "kai-quota-above-capacity" and "have 16 GPU(s)" in f["evidence"][0]
    queues = [{"metadata": {"name": "ml"}}]
    pods = [
        {
            "metadata": {"namespace": "a", "name": "p1", "labels": {"kai.scheduler/queue": "ml"}},
            "status": {"phase": "Running"},
        },
        {
            "metadata": {"namespace": "a", "name": "p2", "labels": {"kai.scheduler/queue": "ml"}},
            "status": {"phase": "Succeeded"},
        },
    ]
    (f,) = batch_queues_owned(queues, pods, "kai_scheduler", "admitted")
    assert f["object"]["names"] == ["ml"] and "a/p1" in f["evidence"][0] and "p2" not in f["evidence"][0]


@pytest.mark.parametrize(
    ("version", "conflict"),
    [("v0.17.0", False), ("0.11.0", False), ("v0.10.5", True), ("v0.9.9", True), ("v0.20.1", True), ("bad", False)],
)
def test_kai_kueue_conflict_by_version(version, conflict):
    assert _kai.kueue_conflict(version) is conflict


def test_prune_children_first_and_landing():
    wanted = _kai.build(kvars([{"name": "keep", "resources": GPU8}]), [])["queues"]
    labels = dict(_kai.OWNER_LABELS)
    live = [
        {"kind": "Queue", "apiVersion": _kai.API_VERSION, "metadata": {"name": "p", "labels": labels}, "spec": {}},
        {
            "kind": "Queue",
            "apiVersion": _kai.API_VERSION,
            "metadata": {"name": "c", "labels": labels},
            "spec": {"parentQueue": "p"},
        },
        {"kind": "Queue", "apiVersion": _kai.API_VERSION, "metadata": {"name": "hand"}, "spec": {}},
        {**wanted[0]},
    ]
    assert [o["metadata"]["name"] for o in batch_queues_owned(wanted, live, "kai_scheduler")] == ["c", "p"]
    assert batch_queues_owned(wanted, live, "kai_scheduler", "landed") == []
    changed = [dict(wanted[0], spec={"resources": {}})]
    (f,) = batch_queues_owned(wanted, changed, "kai_scheduler", "landed")
    assert f["id"] == "kai-object-not-landed"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: batch_queues([], "volcano"), "variables as a dict"),
        (lambda: batch_queues({}, "slurm"), "scheduler must be one of"),
        (lambda: batch_queues({}, "volcano", [1]), "list of Node objects"),
        (lambda: batch_queues_owned({}, [], "volcano"), "input as a list"),
        (lambda: batch_queues_owned([], [], "slurm"), "scheduler must be one of"),
        (lambda: batch_queues_owned([], [], "volcano", "nope"), "check must be"),
    ],
)
def test_filter_errors(call, message):
    with pytest.raises(AnsibleFilterError, match=message):
        call()


FRACTION_POOL = {"name": "l40s-frac", "model": "kai_fraction", "group": "l40s"}
TS_POOL = {"name": "ts", "model": "time_slicing", "replicas": 4, "group": "a"}


@pytest.mark.parametrize(
    ("given", "pools", "sharing", "expect"),
    [
        (None, [], False, []),  # unset, no pool asks: off
        (None, [TS_POOL], False, []),
        (None, [TS_POOL, FRACTION_POOL], True, []),  # unset follows the sharing model
        (True, [], True, []),  # explicit on without a pool: fractions anywhere, allowed
        (False, [], False, []),
        (False, [FRACTION_POOL], False, ["kai-gpu-sharing-off"]),  # the pool's fractional pods would never run
        (True, [FRACTION_POOL], True, []),
        (None, "not a list", False, []),  # malformed pools are the gpu_sharing role's findings
        (None, [{"model": "kai_fraction"}, 3], True, []),
    ],
)
def test_kai_gpu_sharing_follows_the_sharing_model(given, pools, sharing, expect):
    variables = kvars([], **({} if given is None else {"kai_scheduler_gpu_sharing": given}))
    built = _kai.build(variables, NODES, (), pools)
    assert built["chart_values"]["global"]["gpuSharing"] is sharing
    assert errors(built["findings"]) == expect
    via_filter = batch_queues(variables, "kai_scheduler", NODES, [], pools if isinstance(pools, list) else [])
    assert via_filter["chart_values"]["global"]["gpuSharing"] is (sharing if isinstance(pools, list) else False)
    if expect:
        f = built["findings"][0]
        assert "l40s-frac" in f["evidence"][0] and "pending" in f["cause"]


@pytest.mark.parametrize(
    ("scheduler", "variables", "crds", "expect"),
    [
        (
            "volcano",
            vvars([]),
            ["queues.scheduling.volcano.sh"],
            {
                "scheduler": "volcano",
                "api_version": "scheduling.volcano.sh/v1beta1",
                "crd": "queues.scheduling.volcano.sh",
                "holders": {"api_version": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "label_selectors": []},
            },
        ),
        (
            "kai_scheduler",
            kvars([]),
            [],
            {
                "scheduler": "kai_scheduler",
                "api_version": "scheduling.run.ai/v2",
                "crd": "queues.scheduling.run.ai",
                "holders": {"api_version": "v1", "kind": "Pod", "label_selectors": ["kai.scheduler/queue"]},
            },
        ),
    ],
)
def test_what_the_shared_task_set_reads(scheduler, variables, crds, expect):
    """The batch_scheduler role reads each scheduler's own objects from its rules, not from YAML."""
    built = batch_queues(variables, scheduler, [], crds)
    assert {k: built[k] for k in expect} == expect


@pytest.mark.parametrize(
    ("state", "expect"),
    [("present", ["kai-kueue-topology-conflict"]), ("absent", []), (None, ["kai-kueue-topology-conflict"])],
)
def test_kai_kueue_conflict_only_when_installing(state, expect):
    """An old KAI next to Kueue is refused on install; removing it is no conflict."""
    given = {} if state is None else {"kai_scheduler_state": state}
    variables = kvars([], kai_scheduler_chart_version="v0.10.5", **given)
    assert errors(_kai.build(variables, [], ["topologies.kueue.x-k8s.io"])["findings"]) == expect

"""The release rules as tables: the change plan, the values schema check, the Lease decision, subchart CRDs and
default values of a chart tree."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.module_utils.common import _judge
from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_release as hr

DEPLOYED = {"status": "deployed", "chart": "c", "version": "1.0.0", "revision": 3}


@pytest.mark.parametrize(
    ("installed", "installed_values", "values", "expected"),
    [
        (None, None, {}, ["the release is not installed"]),
        (DEPLOYED, {"a": 1}, {"a": 1}, []),
        (DEPLOYED, None, {}, []),  # helm get values prints null for no values
        (DEPLOYED, {"a": {"b": [1, 2]}}, {"a": {"b": (1, 2)}}, []),  # tuples are lists once stored
        (DEPLOYED, {"a": 1, "x": {"y": 1}}, {"a": 2, "x": {"y": 1, "z": 0}}, ["values differ at a, x.z"]),
        ({**DEPLOYED, "version": "0.9.0"}, {}, {}, ["chart c-0.9.0 is installed, c-1.0.0 is asked for"]),
        ({**DEPLOYED, "status": "failed"}, {}, {}, ["the last revision (3) is failed, not deployed"]),
    ],
    ids=["absent", "same", "null-values", "tuple", "values", "version", "failed"],
)
def test_plan(installed, installed_values, values, expected):
    assert hr.plan(installed, installed_values, "c", "1.0.0", values) == expected


SCHEMA = {
    "type": "object",
    "required": ["image"],
    "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
        "mode": {"enum": ["a", "b"]},
        "image": {"type": "object", "properties": {"tag": {"type": "string"}}, "additionalProperties": False},
        "tolerations": {"type": "array", "items": {"type": "object"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "size": {"type": ["string", "integer"]},
    },
}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"image": {"tag": "v1"}, "replicas": 2, "mode": "a", "size": 3, "labels": {"k": "v"}}, []),
        ({"image": {}, "replicas": "2"}, ['replicas: "2" is string, the chart expects integer']),
        ({"image": {}, "replicas": True}, ["replicas: true is boolean, the chart expects integer"]),
        ({"image": {}, "replicas": 2.0}, []),  # YAML 2.0 is an integer for JSON schema
        ({"image": {}, "replicas": 9}, ["replicas: 9 is above the maximum 5"]),
        ({"image": {}, "mode": "c"}, ['mode: "c" is not one of "a", "b"']),
        ({"image": {"tga": "x"}}, ["image.tga: the chart does not accept this key"]),
        ({"image": {}, "tolerations": ["x"]}, ['tolerations[0]: "x" is string, the chart expects object']),
        ({"image": {}, "labels": {"k": 1}}, ["labels.k: 1 is integer, the chart expects string"]),
        ({"image": {}, "size": []}, ["size: [] is array, the chart expects string or integer"]),
        ({}, ["(values): required key image is missing"]),
        ({"image": {}, "unknown": 1}, []),  # not closed at the top: Helm accepts it (unknown_keys warns)
    ],
)
def test_schema_problems(values, expected):
    assert hr.schema_problems(values, SCHEMA) == expected


def test_schema_findings_name_the_variable_and_the_chart():
    (f,) = hr.schema_findings("amd_gpu_operator_values", {"image": {}, "replicas": "x"}, SCHEMA, "c 1.0.0")
    assert f["id"] == "chart-values-schema" and f["object"] == {"kind": "variable", "name": "amd_gpu_operator_values"}
    assert "c 1.0.0" in f["cause"] and "amd_gpu_operator_values" in f["fix"]
    assert "rejects this value" in f["cause"]


def test_schema_findings_merge_every_rejected_value_into_one_finding():
    values = {"replicas": "x"}  # image missing too: two problems, one finding, one cause
    (f,) = hr.schema_findings("v", values, SCHEMA, "c 1.0.0")
    assert f["evidence"] == hr.schema_problems(values, SCHEMA) and len(f["evidence"]) == 2
    assert "rejects these values" in f["cause"]
    msg = _judge.verdict("gpu_operator", [f])["msg"]
    assert msg.startswith("gpu_operator: [chart-values-schema] variable v: ")
    assert all(p in msg for p in f["evidence"]) and msg.endswith("Nothing was changed.")
    assert hr.schema_findings("v", {"image": {}}, SCHEMA, "c 1.0.0") == []


NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)  # noqa: UP017 - module_utils style


def _lease(holder, renewed_ago, duration=60):
    t = (NOW - timedelta(seconds=renewed_ago)).isoformat()
    return {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": t, "renewTime": t}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, "create"),
        (_lease("me", 10), "renew"),
        (_lease("other", 10), "wait"),
        (_lease("other", 61), "take"),  # expired
        (_lease("", 10), "take"),  # released
        ({"holderIdentity": "other"}, "take"),  # no time: cannot expire, so it is not honoured
    ],
)
def test_lease_decision(spec, expected):
    assert hr.lease_decision(spec, "me", NOW) == expected


def test_lease_holder_message_and_name():
    msg = hr.lease_holder_message("n", "kube-system", {**_lease("alice@host run 1", 20), "acquireTime": "T"}, NOW)
    assert msg == "Lease kube-system/n is held by alice@host run 1 since T (expires in 40s unless renewed)"
    assert hr.lease_name("amd-gpu-operator", "kube-amd-gpu") == "gpuops-helm-kube-amd-gpu.amd-gpu-operator"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, "absent"),
        (_lease("me", 10), "ours"),
        (_lease("other", 61), "expired"),  # a run that stopped renewing it
        (_lease("", 10), "released"),
    ],
)
def test_lease_found(spec, expected):
    assert hr.lease_found(hr.lease_decision(spec, "me", NOW), spec) == expected


def test_run_holder_names_the_run_and_is_recognised():
    holder = hr.run_holder("alice", "bastion", 4242, datetime(2026, 1, 1, 13, 0, tzinfo=timezone(timedelta(hours=1))))
    assert holder == "gpuops.platform alice@bastion pid 4242 started 2026-01-01T12:00:00Z"
    assert hr.parse_holder(holder) == {"who": "alice@bastion", "pid": 4242, "started": "2026-01-01T12:00:00Z"}
    for other in ("alice@bastion run 1a2b3c4d", holder + "\n", None, "gpuops.platform a@b pid x started t"):
        assert hr.parse_holder(other) is None


def _hist(*statuses):
    return [{"revision": i, "status": s} for i, s in enumerate(statuses, 1)]


@pytest.mark.parametrize(
    ("status", "history", "found", "expected"),
    [
        ("deployed", _hist("deployed"), "expired", ("apply", None)),
        ("failed", _hist("deployed", "failed"), "absent", ("apply", None)),  # helm upgrades a failed release itself
        ("pending-upgrade", _hist("deployed", "pending-upgrade"), "expired", ("rollback", 1)),
        ("pending-upgrade", _hist("superseded", "deployed", "failed", "pending-upgrade"), "absent", ("rollback", 2)),
        ("pending-rollback", _hist("superseded", "failed", "pending-rollback"), "released", ("rollback", 1)),
        ("pending-install", _hist("pending-install"), "expired", ("uninstall", None)),
        ("pending-upgrade", _hist("failed", "pending-upgrade"), "expired", ("uninstall", None)),  # never deployed
        ("pending-upgrade", _hist("deployed", "pending-upgrade"), "ours", ("refuse", None)),  # not known to be over
        ("pending-install", _hist("pending-install"), None, ("refuse", None)),  # no Lease given
    ],
    ids=[
        "deployed",
        "failed",
        "upgrade-killed",
        "last-deployed-not-last",
        "rollback-killed",
        "install-killed",
        "never-deployed",
        "held-by-this-run",
        "no-lock",
    ],
)
def test_pending_recovery(status, history, found, expected):
    assert hr.pending_recovery(status, history, found) == expected
    assert hr.parse_time("2026-01-01T12:00:00.000000Z") == NOW and hr.parse_time("garbage") is None


@pytest.mark.parametrize(
    ("condition", "values", "expected"),
    [
        (None, {}, True),
        ("kmm.enabled", {"kmm": {"enabled": False}}, False),
        ("kmm.enabled", {"kmm": {"enabled": "false"}}, True),  # only a boolean decides, as in Helm
        ("a.on,b.on", {"b": {"on": False}}, False),  # first path holding a boolean
        ("a.on,b.on", {"a": {"on": True}, "b": {"on": False}}, True),
        ("missing.path", {}, True),
    ],
)
def test_dependency_enabled(condition, values, expected):
    assert hr.dependency_enabled(condition, values) is expected


def _chart(root: Path, name: str, values: dict, deps=(), crds=()):
    root.mkdir(parents=True)
    meta = {"apiVersion": "v2", "name": name, "version": "1.0.0"}
    if deps:
        meta["dependencies"] = [dict(d) for d in deps]
    (root / "Chart.yaml").write_text(yaml.safe_dump(meta))
    (root / "values.yaml").write_text(yaml.safe_dump(values))
    for crd in crds:
        (root / "crds").mkdir(exist_ok=True)
        (root / "crds" / crd).write_text("kind: CustomResourceDefinition\n")


@pytest.fixture
def tree(tmp_path):
    top = tmp_path / "top"
    _chart(
        top,
        "top",
        {"kmm": {"enabled": True}, "nfd": {"enabled": False}, "remediation": {"installCRDs": True}},
        deps=[
            {"name": "kmm", "condition": "kmm.enabled"},
            {"name": "nfd", "condition": "nfd.enabled"},
            {"name": "remediation-crds", "condition": "remediation.installCRDs"},
        ],
        crds=["top.yaml"],
    )
    _chart(
        top / "charts" / "kmm",
        "kmm",
        {"controller": {"tolerations": []}, "inner": {"enabled": True}},
        deps=[{"name": "inner", "condition": "inner.enabled"}],
        crds=["b.yaml", "a.yaml"],
    )
    _chart(top / "charts" / "kmm" / "charts" / "inner", "inner", {"x": 1}, crds=["inner.yaml"])
    _chart(top / "charts" / "nfd", "nfd", {}, crds=["nfd.yaml"])
    _chart(top / "charts" / "remediation-crds", "remediation-crds", {}, crds=["wf.yaml"])
    return top


def _rel(paths, top):
    return [str(Path(p).relative_to(top)) for p in paths]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {},
            [
                "crds/top.yaml",
                "charts/kmm/crds/a.yaml",
                "charts/kmm/crds/b.yaml",
                "charts/kmm/charts/inner/crds/inner.yaml",
                "charts/remediation-crds/crds/wf.yaml",
            ],
        ),
        (
            {"nfd": {"enabled": True}, "kmm": {"inner": {"enabled": False}}},
            [
                "crds/top.yaml",
                "charts/kmm/crds/a.yaml",
                "charts/kmm/crds/b.yaml",
                "charts/nfd/crds/nfd.yaml",
                "charts/remediation-crds/crds/wf.yaml",
            ],
        ),
        ({"kmm": {"enabled": False}, "remediation": {"installCRDs": False}}, ["crds/top.yaml"]),
    ],
    ids=["defaults", "nested-condition", "disabled"],
)
def test_chart_crd_files_follow_the_subchart_conditions(tree, values, expected):
    assert _rel(hr.chart_crd_files(str(tree), values), tree) == expected


def test_chart_default_values_put_subchart_defaults_under_their_names(tree):
    values = hr.chart_default_values(str(tree))
    assert values["kmm"] == {"enabled": True, "controller": {"tolerations": []}, "inner": {"enabled": True, "x": 1}}
    assert values["remediation"] == {"installCRDs": True} and values["remediation-crds"] == {}


def test_merge():
    assert hr.merge({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": 3}, "l": [2]}) == {"a": {"b": 3, "c": 2}, "l": [2]}


# ---------------------------------------------------------------------------------------------- landing rule

LANDING = [
    # (asked, live spec, paths, expected lines)
    ({"mig": {"strategy": "mixed"}}, {"mig": {"strategy": "mixed"}}, [["mig", "strategy"]], []),
    (
        {"mig": {"strategy": "mixed"}},
        {"mig": {"strategy": "single"}},
        [["mig", "strategy"]],
        ['mig.strategy: asked "mixed", live "single"'],
    ),
    # a field the CRD pruned is missing from the live spec
    (
        {"driver": {"upgradePolicy": {"maxParallelUpgrades": 2}}},
        {"driver": {}},
        [["driver", "upgradePolicy"]],
        ['driver.upgradePolicy: asked {"maxParallelUpgrades": 2}, live null'],
    ),
    # not asked (null or empty) is not compared
    ({"driver": {"version": ""}}, {"driver": {"version": "570.1"}}, [["driver", "version"]], []),
    ({}, {"driver": {"version": "570.1"}}, [["driver", "version"]], []),
    # a step on the way that is not a mapping
    ({"dcgm": {"enabled": True}}, {"dcgm": "yes"}, [["dcgm", "enabled"]], ["dcgm.enabled: asked true, live null"]),
    # false is asked (not "empty") and must land
    (
        {"cdi": {"enabled": False}},
        {"cdi": {"enabled": True}},
        [["cdi", "enabled"]],
        ["cdi.enabled: asked false, live true"],
    ),
    # several paths, one line each, in the order asked
    (
        {"a": 1, "b": 2},
        {"a": 2, "b": 3},
        [["b"], ["a"]],
        ["b: asked 2, live 3", "a: asked 1, live 2"],
    ),
]


@pytest.mark.parametrize(("asked", "live", "paths", "expected"), LANDING)
def test_landing_differences(asked, live, paths, expected):
    assert hr.landing_differences(asked, live, paths) == expected


def test_landing_filter_rejects_paths_that_are_not_key_lists():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpuops.platform.plugins.filter.landing_differences import landing_differences

    assert landing_differences({"a": 1}, {"a": 2}, [["a"]]) == ["a: asked 1, live 2"]
    with pytest.raises(AnsibleFilterError, match="list of key lists"):
        landing_differences({"a": 1}, {"a": 2}, ["a"])

"""Input rules (plugins/module_utils/inputs/) as tables: every finding names the variable, shows the value and
gives a fix."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import (
    _inputs,
    _inputs_choices,
    _inputs_roles,
    _inputs_secrets,
)


def ids(findings):
    return [f["id"] for f in findings]


@pytest.mark.parametrize(
    ("rule", "value", "ok"),
    [
        ("dns1123_label", "gpu-operator", True),
        ("dns1123_label", "a", True),
        ("dns1123_label", "GPU-operator", False),
        ("dns1123_label", "gpu_operator", False),
        ("dns1123_label", "-gpu", False),
        ("dns1123_label", "gpu.operator", False),
        ("dns1123_label", "x" * 63, True),
        ("dns1123_label", "x" * 64, False),
        ("dns1123_label", "", False),
        ("dns1123_label", 5, False),
        ("release_name", "gpu-operator", True),
        ("release_name", "gpu.operator", True),
        ("release_name", "x" * 53, True),
        ("release_name", "x" * 54, False),
        ("release_name", "Gpu", False),
        ("release_name", "gpu operator", False),
        ("chart_version", "v26.7.0", True),
        ("chart_version", "0.19.0", True),
        ("chart_version", "1.2.3-rc.1+build.5", True),
        ("chart_version", "latest", False),
        ("chart_version", "", False),
        ("chart_version", ">=26.0.0", False),
        ("chart_version", "v26.7", False),
        ("chart_version", "26.*", False),
        ("nvidia_driver_version", "595.91.07", True),
        ("nvidia_driver_version", "580.65", True),
        ("nvidia_driver_version", "", True),
        ("nvidia_driver_version", "595", False),
        ("nvidia_driver_version", "595.91.07-ubuntu24.04", False),
        ("amd_driver_version", "30.20.1", True),
        ("amd_driver_version", "6.4", True),
        ("amd_driver_version", "", False),
        ("amd_driver_version", "30.20.1; reboot", False),
        ("amd_driver_version", "$(id)", False),
        ("amd_driver_version", "30.20.1`id`", False),
        ("amd_driver_version", "latest", False),
        ("url", "", True),
        ("url", "http://127.0.0.1:18879", True),
        ("url", "https://charts.example/internal", True),
        ("url", "oci://registry.example/charts", True),
        ("url", "127.0.0.1:18879", False),
        ("url", "ftp://x", False),
        ("non_empty_mapping", {"a": "b"}, True),
        ("non_empty_mapping", {}, False),
        ("non_empty_mapping", "a=b", False),
        ("batch_schedulers", [], True),
        ("dns1123_label", "", False),
        ("batch_schedulers", ["kueue"], True),
        ("batch_schedulers", ["slurm"], False),
        ("batch_schedulers", ["volcano"], True),
        ("batch_schedulers", ["kueue", "kai_scheduler"], True),  # KAI v0.11+ has its own Topology
        ("batch_schedulers", ["kueue", "volcano", "kai_scheduler"], True),
        ("batch_schedulers", ["kueue", "kueue"], False),
    ],
)
def test_value_rules(rule, value, ok):
    found = _inputs_choices.RULES[rule]("the_var", value)
    assert (found == []) is ok, found
    for f in found:
        assert f["object"] == {"kind": "variable", "name": "the_var"}
        assert f["evidence"][0].startswith("the_var: ")
        assert "the_var" in f["fix"]
        assert "the_var" in _inputs.message(f)


@pytest.mark.parametrize(
    ("value", "kwargs", "expect"),
    [
        (["kueue", "kai_scheduler"], {"kai_version": "v0.17.0"}, []),
        (["kueue", "kai_scheduler"], {"kai_version": "v0.10.5"}, ["batch-scheduler-conflict"]),
        (["kueue", "kai_scheduler"], {"kai_version": "v0.20.1"}, ["batch-scheduler-conflict"]),  # retracted
        (["kai_scheduler"], {"kai_version": "v0.10.5"}, []),  # no Kueue, no conflict
        (["volcano"], {"volcano_scheduler_name": "default-scheduler"}, ["batch-scheduler-name-claimed"]),
        (["kueue", "volcano"], {"volcano_scheduler_name": "volcano"}, []),
        (["volcano", "kai_scheduler"], {"volcano_scheduler_name": "kai-scheduler"}, ["batch-scheduler-name-claimed"]),
        (["volcano", "kai_scheduler"], {}, []),
        # a kai_fraction sharing pool needs KAI Scheduler
        (["kueue"], {"sharing_pools": [{"name": "frac", "model": "kai_fraction"}]}, ["batch-scheduler-kai-missing"]),
        (["kai_scheduler"], {"sharing_pools": [{"name": "frac", "model": "kai_fraction"}]}, []),
        (["kueue"], {"sharing_pools": [{"name": "ts", "model": "time_slicing"}, "junk"]}, []),
    ],
)
def test_batch_schedulers_versions_and_names(value, kwargs, expect):
    found = _inputs_choices.batch_schedulers("gpuops_batch_schedulers", value, **kwargs)
    assert [f["id"] for f in found] == expect
    for f in found:
        assert "gpuops_batch_schedulers" in f["fix"]
    if "batch-scheduler-name-claimed" in expect:
        assert "kube-scheduler" in found[0]["cause"] or "kai_scheduler" in found[0]["cause"]


def test_metacharacters_are_named():
    (f,) = _inputs.amd_driver_version("amd_gpu_operator_driver_version", "30.20.1; rm -rf /")
    assert "shell metacharacter(s) ';' space;" in f["cause"]
    assert f["evidence"] == ['amd_gpu_operator_driver_version: "30.20.1; rm -rf /"']


@pytest.mark.parametrize(
    ("content", "context", "expect"),
    [
        (None, None, "kubeconfig-missing"),
        ("42\n", None, "kubeconfig-malformed"),
        ("clusters: 5\ncurrent-context: a\n", None, "kubeconfig-malformed"),
        ("- a\n- b\n", None, "kubeconfig-malformed"),
        ("a: [\n", None, "kubeconfig-malformed"),
        ("clusters: []\n", None, "kubeconfig-malformed"),
        (
            "clusters: [{name: c}]\ncontexts: [{name: a}]\nusers: [{name: u}]\ncurrent-context: a\n",
            None,
            None,
        ),
        ("clusters: [{name: c}]\ncontexts: [{name: a}]\ncurrent-context: a\n", "a", None),
        ("clusters: [{name: c}]\ncontexts: [{name: a}]\ncurrent-context: a\n", "b", "kubeconfig-context-missing"),
        ("clusters: [{name: c}]\ncontexts: [{name: a}]\n", None, "kubeconfig-context-missing"),
    ],
)
def test_kubeconfig(tmp_path, content, context, expect):
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    found = _inputs_choices.kubeconfig("gpuops_kubeconfig", str(path), context=context)
    assert ids(found) == ([expect] if expect else []), found
    for f in found:
        text = _inputs.message(f)
        # names the variable, the path (or the context asked for) and a fix; never a Python error
        assert "gpuops_kubeconfig" in text and "Fix: set" in text
        assert str(path) in text or context in text
        assert "object is not" not in text


def test_kubeconfig_empty_means_client_default():
    assert _inputs_choices.kubeconfig("gpuops_kubeconfig", "") == []


OPTIONS = {
    "r_state": {"type": "str", "choices": ["present", "absent"], "description": "State."},
    "r_timeout": {"type": "int", "description": "Seconds."},
    "r_enabled": {"type": "bool", "description": "On."},
    "r_tolerations": {"type": "list", "elements": "dict", "description": "Tolerations."},
    "r_values": {"type": "dict", "description": "Values."},
    "r_name": {"type": "str", "description": "Name."},
    "r_any": {"type": "raw", "description": "Anything."},
    "r_auto": {"type": "bool", "default": None, "description": "Null: decided for you."},
}


@pytest.mark.parametrize(
    ("variables", "expect"),
    [
        ({"r_state": "present", "r_timeout": 5, "r_enabled": True, "r_tolerations": [], "r_values": {}}, []),
        ({"r_timeout": "30", "r_enabled": "yes", "r_name": 5}, []),  # converted as Ansible converts
        ({"r_state": "presnet"}, ["variable-choice"]),
        ({"r_timeout": "soon"}, ["variable-type"]),
        ({"r_enabled": "maybe"}, ["variable-type"]),
        ({"r_tolerations": [{"key": "a"}, "b"]}, ["variable-type"]),
        ({"r_values": "driver=off"}, ["variable-type"]),
        ({"r_name": ["a"]}, ["variable-type"]),
        ({"r_any": object}, []),
        ({"r_enabled": None}, ["variable-type"]),  # null only where the spec declares default: null
        ({"r_auto": None}, []),
        ({"r_auto": "maybe"}, ["variable-type"]),
    ],
)
def test_argument_types(variables, expect):
    found = _inputs_roles.argument_types(OPTIONS, variables)
    assert ids(found) == expect, found
    for f in found:
        assert f["object"]["name"] in variables


def test_unknown_variables_suggest_and_explain_removed():
    found = _inputs_roles.unknown_variables(
        "r_",
        OPTIONS,
        ["r_timout", "r_node_selector", "r_state", "other_var"],
        removed={"r_node_selector": "label the nodes instead."},
    )
    by = {f["object"]["name"]: f for f in found}
    assert sorted(by) == ["r_node_selector", "r_timout"]
    assert "r_timeout" in by["r_timout"]["fix"]
    assert by["r_node_selector"]["fix"] == "label the nodes instead."


def test_the_role_outputs_are_not_unknown_variables():
    """A second run of a role in one play sees the facts and results the first one set (r_status)."""
    present = {"r_status": {}, "r_fields": {}, "r_stauts": 1}
    found = _inputs_roles.check([], present, options=OPTIONS, prefix="r_", outputs=["r_status", "r_fields"])
    assert [f["object"]["name"] for f in found] == ["r_stauts"]
    assert [f["object"]["name"] for f in _inputs_roles.check([], present, options=OPTIONS, prefix="r_")] == [
        "r_fields",
        "r_status",
        "r_stauts",
    ]


ROLE_VALUES = {"driver": {"enabled": True, "version": "595.91.07", "rdma": {"enabled": False}}, "tolerations": []}


@pytest.mark.parametrize(
    ("user", "expect"),
    [
        ({}, []),
        ({"driver": {"enabled": False}}, []),
        ({"driver": {"enabled": "false"}}, ["gpu_values.driver.enabled"]),
        ({"driver": {"rdma": "on"}}, ["gpu_values.driver.rdma"]),
        ({"driver": {"rdma": {"enabled": 1}}}, ["gpu_values.driver.rdma.enabled"]),
        ({"tolerations": {"key": "a"}}, ["gpu_values.tolerations"]),
        ({"unknown": {"x": 1}}, []),  # not a key the role knows: the chart's schema/keys check judges it
        ({"driver": {"version": None}}, []),
    ],
)
def test_known_value_types(user, expect):
    found = _inputs_roles.known_value_types("gpu_values", ROLE_VALUES, user)
    assert [f["object"]["name"] for f in found] == expect, found


def test_known_value_types_needs_a_mapping():
    (f,) = _inputs_roles.known_value_types("gpu_values", ROLE_VALUES, "driver=off")
    assert f["id"] == "variable-type" and "mapping" in f["fix"]


def test_check_reports_one_finding_per_variable():
    found = _inputs_roles.check(
        [{"var": "r_name", "rule": "dns1123_label"}, {"var": "r_other", "rule": "chart_version", "value": "latest"}],
        {"r_name": ["A"], "r_values": {"driver": {"enabled": "x"}}},
        options=OPTIONS,
        prefix="r_",
        values=[{"var": "r_values", "role_values": ROLE_VALUES}],
    )
    assert [(f["id"], f["object"]["name"]) for f in found] == [
        ("variable-type", "r_name"),
        ("chart-version-unpinned", "r_other"),
        ("value-type", "r_values.driver.enabled"),
    ]


def test_show_prints_yaml_not_python():
    assert _inputs.show({"a": True, "b": None, "c": ["x"]}) == '{a: true, b: null, c: ["x"]}'


def test_kubeconfig_content_as_a_mapping():
    good = {"clusters": [{"name": "c"}], "contexts": [{"name": "a"}], "current-context": "a"}
    assert _inputs_choices.kubeconfig("gpuops_kubeconfig", good) == []
    assert ids(_inputs_choices.kubeconfig("gpuops_kubeconfig", {"clusters": 3})) == ["kubeconfig-malformed"]


def test_dns1123_label_may_allow_empty():
    assert _inputs.dns1123_label("v", "", allow_empty=True) == []
    assert _inputs.dns1123_label("v", None, allow_empty=True) == []
    assert [f["id"] for f in _inputs.dns1123_label("v", "Bad_Name", allow_empty=True)] == ["name-invalid"]


# --- structured variables, field by field, against the roles' own argument specs (issue 27) ----------------
def _role_options(role):
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[4] / "roles" / role / "meta" / "argument_specs.yml"
    return yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"]


@pytest.mark.parametrize(
    ("role", "variables", "expect"),
    [
        ("kueue", {"kueue_teams": [{"name": "ml", "namespaces": ["ml"], "quotas": []}]}, []),
        (
            "kueue",
            {"kueue_teams": [{"name": "ml", "namespaces": ["ml"], "quotsa": [{"flavor": "h100"}]}]},
            [("variable-field-unknown", "kueue_teams[0].quotsa", "did you mean quotas?")],
        ),
        (
            "kueue",
            {"kueue_teams": [{"name": "ml"}, {"name": "cv", "queueing_strategy": "StrictFifo"}]},
            [("variable-choice", "kueue_teams[1].queueing_strategy", "StrictFIFO")],
        ),
        ("kueue", {"kueue_teams": [{"namespaces": ["ml"]}]}, [("variable-field-missing", "kueue_teams[0].name", "")]),
        (
            "kueue",
            {"kueue_flavors": [{"name": "h100", "node_labels": ["a"]}]},
            [("variable-type", "kueue_flavors[0].node_labels", "a dict")],
        ),
        ("volcano", {"volcano_queues": [{"name": "ml", "weight": 2, "capability": {"nvidia.com/gpu": 8}}]}, []),
        (
            "volcano",
            {"volcano_queues": [{"name": "ml", "wieght": 2}]},
            [("variable-field-unknown", "volcano_queues[0].wieght", "did you mean weight?")],
        ),
        (
            "volcano",
            {"volcano_queues": [{"name": "ml", "weight": "heavy"}]},
            [("variable-type", "volcano_queues[0].weight", "an int")],
        ),
        ("volcano", {"volcano_queues": [{"name": "ml", "parent": None}]}, []),  # unset field: the default applies
        (
            "kai_scheduler",
            {"kai_scheduler_queues": [{"name": "ml", "resorces": {"gpu": {"quota": 4}}}]},
            [("variable-field-unknown", "kai_scheduler_queues[0].resorces", "did you mean resources?")],
        ),
        (
            "host_prep",
            {"host_prep_sriov_vfs": [{"pf": "ens1f0np0", "numvfs": 8}]},
            [
                ("variable-field-unknown", "host_prep_sriov_vfs[0].numvfs", "did you mean num_vfs?"),
                ("variable-field-missing", "host_prep_sriov_vfs[0].num_vfs", "required"),
            ],
        ),
        (
            "gpu_operator",
            {"gpu_operator_driver_upgrade_policy": {"autoUpgrade": True, "maxParallelUpgrades": -1}},
            [("variable-range", "gpu_operator_driver_upgrade_policy.maxParallelUpgrades", "0 or more")],
        ),
        (
            "gpu_operator",
            {"gpu_operator_driver_upgrade_policy": {"drain": {"enable": True, "timeoutSecond": 60}}},
            [("variable-field-unknown", "gpu_operator_driver_upgrade_policy.drain.timeoutSecond", "timeoutSeconds")],
        ),
        (
            "gpu_operator",
            {"gpu_operator_wait_timeout": -5},
            [("variable-range", "gpu_operator_wait_timeout", "1 or more")],
        ),
        (
            "gpu_operator",
            {"gpu_operator_wait_timeout": 0},
            [("variable-range", "gpu_operator_wait_timeout", "1 or more")],
        ),
        ("gpu_operator", {"gpu_operator_wait_timeout": "600"}, []),
        ("gpuops", {"gpuops_upgrade_timeout": -1}, [("variable-range", "gpuops_upgrade_timeout", "1 or more")]),
        ("monitoring", {"monitoring_network_port": 70000}, [("variable-range", "monitoring_network_port", "65535")]),
        ("monitoring", {"monitoring_network_port": 9100}, []),
    ],
)
def test_structured_variables_field_by_field(role, variables, expect):
    found = _inputs_roles.argument_types(_role_options(role), variables)
    assert [(f["id"], f["object"]["name"]) for f in found] == [(e[0], e[1]) for e in expect], found
    for f, e in zip(found, expect, strict=True):
        assert e[2] in _inputs.message(f)
        assert f["severity"] == "error"


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("15s", True),
        ("1m30s", True),
        ("1h", True),
        ("500ms", True),
        ("", True),
        ("0s", False),
        ("five seconds", False),
        ("15", False),
        ("s", False),
        ("15s\n", False),
        ("30s1m", False),
        (15, False),
    ],
)
def test_duration(value, ok):
    assert (_inputs.duration("monitoring_scrape_interval", value) == []) is ok


def test_url_fix_says_what_the_url_is_for():
    (f,) = _inputs.url(
        "monitoring_prometheus_url", "prometheus:9090", what="the URL of the Prometheus", example="http://p:9090"
    )
    assert "repository" not in f["fix"]
    assert f["fix"] == "set monitoring_prometheus_url to the URL of the Prometheus, for example http://p:9090."
    assert f["cause"] == "The value is not a URL starting with http:// or https:// or oci://."


@pytest.mark.parametrize(
    ("value", "ok"),
    [("http://prometheus:9090", True), ("https://p.example", True), ("oci://registry.example/charts", False)],
)
def test_url_schemes_limit_what_is_accepted_and_said(value, ok):
    got = _inputs.url("monitoring_prometheus_url", value, schemes=["http", "https"])
    assert (got == []) is ok
    if not ok:
        assert got[0]["cause"] == "The value is not a URL starting with http:// or https://."


@pytest.mark.parametrize(
    ("values", "flagged"),
    [
        ({"grafana": {"adminPassword": "x1y2z3"}}, ["v.grafana.adminPassword"]),
        (
            {"auth": {"token": "abc"}, "s3": {"accessKey": "AKIA", "secretKey": "s"}},
            ["v.auth.token", "v.s3.accessKey", "v.s3.secretKey"],
        ),
        ({"grafana": {"admin": {"existingSecret": "grafana-admin", "passwordKey": "admin-password"}}}, []),
        ({"imagePullSecrets": ["ngc"], "tokenSecretRef": "t", "secretName": "s"}, []),
        ({"grafana": {"adminPassword": ""}}, []),  # empty: nothing stored
    ],
)
def test_credentials_in_chart_values_are_warned_about(values, flagged):
    found = _inputs_secrets.secret_values("v", values)
    assert [f["object"]["name"] for f in found] == flagged
    assert all(f["severity"] == "warning" for f in found)
    for f in found:
        assert all(s not in _inputs.message(f) for s in ("x1y2z3", "AKIA"))


def test_masked_hides_a_secret_everywhere():
    findings = [
        _inputs.variable_finding("variable-type", "k", ["nvapi-123"], "The value nvapi-123 is a list.", "set k."),
        _inputs.variable_finding("other", "x", "y", "k was nvapi-123", "use nvapi-123"),
    ]
    out = _inputs_secrets.masked(findings, {"k": ["nvapi-123"]})
    assert "nvapi-123" not in str(out)
    assert out[0]["evidence"] == ["k: ******** (a list, not shown: the variable is a secret)"]
    assert findings[0]["cause"] == "The value nvapi-123 is a list."  # the input is not changed


@pytest.mark.parametrize(
    ("nfd_role", "options", "twice"),
    [
        (True, {"gpu_operator": True, "network_operator": True}, False),  # the defaults: bundled NFDs off
        (True, {"gpu_operator": True, "gpu_operator_nfd": True}, True),
        (True, {"gpu_operator": False, "gpu_operator_nfd": True}, False),  # that operator is not installed
        (True, {"network_operator": True, "network_operator_nfd_managed": False}, True),
        (True, {"amd_gpu_operator": True, "amd_gpu_operator_nfd": True}, True),
        (False, {"gpu_operator": True}, False),  # the GPU Operator's own NFD, alone
        (False, {"gpu_operator": True, "network_operator": True}, True),  # both charts bundle theirs by default
        (False, {"gpu_operator": True, "network_operator": True, "network_operator_nfd_managed": True}, False),
    ],
)
def test_never_two_nfds(nfd_role, options, twice):
    found = _inputs_choices.nfd_sources("gpuops_nfd_managed", nfd_role, **options)
    assert ids(found) == (["nfd-twice"] if twice else [])


def test_readable_file(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    assert _inputs_choices.readable_file("gpuops_chart_repo_ca_file", str(ca)) == []
    assert _inputs_choices.readable_file("gpuops_chart_repo_ca_file", "") == []
    assert ids(_inputs_choices.readable_file("gpuops_chart_repo_ca_file", str(tmp_path / "nope.pem"))) == [
        "file-missing"
    ]
    assert ids(_inputs_choices.readable_file("gpuops_chart_repo_ca_file", str(tmp_path))) == ["file-missing"]
    (f,) = _inputs_choices.readable_file("gpuops_chart_repo_ca_file", str(tmp_path / "x"), what="the CA bundle")
    assert "does not exist" in f["cause"] and "the CA bundle" in f["fix"]

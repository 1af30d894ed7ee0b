"""gpuops.platform.role_inputs through main(): findings and the failure message, in check mode and not; the
rules themselves are tested as tables in module_utils/test_inputs.py."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.modules import role_inputs

OPTIONS = {
    "r_namespace": {"type": "str", "description": "Namespace."},
    "r_timeout": {"type": "int", "description": "Seconds."},
    "r_values": {"type": "dict", "description": "Values."},
}


@pytest.mark.parametrize("check_mode", [True, False])
def test_good_inputs_pass(run_module, check_mode):
    result, failed = run_module(
        role_inputs,
        {
            "role": "r",
            "prefix": "r_",
            "options": OPTIONS,
            "variables": {"r_namespace": "gpu-operator", "r_timeout": 5, "r_values": {"driver": {"enabled": False}}},
            "checks": [{"var": "r_namespace", "rule": "dns1123_label"}],
            "values": [{"var": "r_values", "role_values": {"driver": {"enabled": True}}}],
        },
        check_mode=check_mode,
    )
    assert not failed, result
    assert result["findings"] == [] and result["changed"] is False


@pytest.mark.parametrize("check_mode", [True, False])
def test_bad_inputs_fail_naming_each_variable_value_and_fix(run_module, check_mode):
    result, failed = run_module(
        role_inputs,
        {
            "role": "r",
            "prefix": "r_",
            "options": OPTIONS,
            "removed": {"r_node_selector": "label the nodes."},
            "variables": {
                "r_namespace": "Bad_NS",
                "r_timeout": "soon",
                "r_node_selector": {"a": "b"},
                "r_values": {"driver": {"enabled": "no"}},
            },
            "checks": [
                {"var": "r_namespace", "rule": "dns1123_label"},
                {"var": "r_version", "rule": "amd_driver_version", "value": "1.2;id"},
                {"var": "r_unset", "rule": "chart_version"},
            ],
            "values": [{"var": "r_values", "role_values": {"driver": {"enabled": True}}}],
        },
        check_mode=check_mode,
    )
    assert failed
    assert [(f["id"], f["object"]["name"]) for f in result["findings"]] == [
        ("variable-type", "r_timeout"),
        ("variable-unknown", "r_node_selector"),
        ("name-invalid", "r_namespace"),
        ("driver-version-invalid", "r_version"),
        ("chart-version-unpinned", "r_unset"),
        ("value-type", "r_values.driver.enabled"),
    ]
    assert result["msg"].startswith("r: 6 input error(s), nothing was changed: ")
    assert 'r_namespace: "Bad_NS".' in result["msg"] and "Fix: label the nodes." in result["msg"]
    assert "r_unset: null." in result["msg"]
    assert len(result["report"]) == 6 and all(" Fix: " in line for line in result["report"])


def test_a_wrongly_typed_secret_is_named_but_never_shown(run_module):
    """gpu_operator_ngc_api_key given as a list was printed four times in the error (issue 27)."""
    import json

    options = dict(OPTIONS, r_api_key={"type": "str", "no_log": True, "description": "Key."})
    result, failed = run_module(
        role_inputs,
        {"role": "r", "prefix": "r_", "options": options, "variables": {"r_api_key": ["nvapi-s3cr3t", "other-part"]}},
    )
    assert failed
    assert [(f["id"], f["object"]["name"]) for f in result["findings"]] == [("variable-type", "r_api_key")]
    assert "r_api_key: ******** (a list" in result["msg"]
    text = json.dumps(result)
    assert "nvapi-s3cr3t" not in text and "other-part" not in text


def test_a_credential_in_chart_values_is_a_warning_that_names_the_variable_to_use(run_module):
    result, failed = run_module(
        role_inputs,
        {
            "role": "r",
            "options": OPTIONS,
            "variables": {"r_values": {"grafana": {"adminPassword": "hunter2-long", "admin": {"existingSecret": "x"}}}},
            "values": [
                {
                    "var": "r_values",
                    "role_values": {},
                    "instead": {"grafana.adminPassword": "monitoring_grafana_admin_password"},
                }
            ],
        },
    )
    assert not failed, result
    (f,) = result["findings"]
    assert (f["id"], f["severity"], f["object"]["name"]) == (
        "value-secret-in-release",
        "warning",
        "r_values.grafana.adminPassword",
    )
    assert "monitoring_grafana_admin_password" in f["fix"]
    assert "hunter2-long" not in str(result)
    assert "r_values.grafana.adminPassword" in str(result["warnings"])


@pytest.mark.parametrize(("url", "ok"), [("http://prometheus:9090", True), ("oci://registry.example/charts", False)])
def test_a_url_check_takes_the_schemes_the_variable_accepts(run_module, url, ok):
    result, failed = run_module(
        role_inputs,
        {
            "role": "r",
            "prefix": "r_",
            "options": {"r_url": {"type": "str", "description": "Prometheus."}},
            "variables": {"r_url": url},
            "checks": [{"var": "r_url", "rule": "url", "schemes": ["http", "https"]}],
        },
    )
    assert failed is not ok, result
    if not ok:
        assert "not a URL starting with http:// or https://." in result["msg"], result["msg"]


CHART = {"var": "r_chart_version", "name": "c", "repo_url": "http://repo/charts", "ca_file": "", "timeout": 7}


@pytest.mark.parametrize(
    ("version", "published", "read", "failed_with"),
    [
        ("1.2.3", True, True, None),
        ("9.9.9", False, True, "Chart c 9.9.9 is not in http://repo/charts (it has: 1.2.3)"),
        ("latest", False, False, "The value is not a pinned version"),  # the format rule answers; no read
    ],
)
def test_the_chart_option_reads_the_repository_once_the_other_inputs_are_right(
    run_module, monkeypatch, version, published, read, failed_with
):
    calls = []

    def index(repo_url, chart, ca_file, timeout, get=None):
        calls.append((repo_url, chart, ca_file, timeout))
        return ["1.2.3"]

    monkeypatch.setattr(role_inputs._chart_index, "index_versions", index)
    result, failed = run_module(
        role_inputs,
        {
            "role": "r",
            "variables": {"r_chart_version": version},
            "checks": [{"var": "r_chart_version", "rule": "chart_version"}],
            "chart": CHART,
        },
    )
    assert calls == ([("http://repo/charts", "c", None, 7)] if read else [])
    assert failed is (failed_with is not None), result
    if failed_with:
        assert failed_with in result["msg"], result["msg"]
        assert "r_chart_version" in result["msg"] and "nothing was changed" in result["msg"]

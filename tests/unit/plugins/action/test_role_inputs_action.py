"""gpuops.platform.role_inputs' action plugin: what a chart role's inputs task (``chart_role: true``) gets filled in
from its variables - the prefix, every variable with it, the argument spec's options, the pinned chart to look up only
when the run's plan installs the role, and the standard checks around the role's own - as tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.action.role_inputs import chart_lookup, chart_role_args

REPO = Path(__file__).resolve().parents[4]
VARS = {
    "nfd_state": "present",
    "nfd_chart_name": "node-feature-discovery",
    "nfd_chart_version": "0.19.0",
    "nfd_chart_repo_url": "https://kubernetes-sigs.github.io/node-feature-discovery/charts",
    "nfd_namespace": "node-feature-discovery",
    "gpuops_kubeconfig_context": "lab",
    "_gpuops_planned_roles": ["nfd", "gpu_operator"],
    "gpu_operator_state": "present",
}


def _resolve(extra: dict[str, Any] | None = None):
    values = {**VARS, **(extra or {})}
    return values.get


def test_a_chart_role_gets_its_variables_options_chart_and_standard_checks():
    names = sorted(VARS)
    args = chart_role_args(
        {"role": "nfd", "chart_role": True, "checks": [{"var": "nfd_x", "rule": "duration"}]},
        names,
        _resolve(),
        str(REPO / "roles" / "nfd"),
    )
    assert "chart_role" not in args and "chart_when" not in args
    assert args["prefix"] == "nfd_"
    assert set(args["variables"]) == {n for n in VARS if n.startswith("nfd_")}  # not gpuops_ nor another role's
    spec = yaml.safe_load((REPO / "roles/nfd/meta/argument_specs.yml").read_text())
    assert args["options"] == spec["argument_specs"]["main"]["options"]
    assert args["chart"] == {
        "var": "nfd_chart_version",
        "name": "node-feature-discovery",
        "repo_url": VARS["nfd_chart_repo_url"],
        "ca_file": "",
    }
    assert [(c["var"], c["rule"]) for c in args["checks"]] == [
        ("nfd_release_name", "release_name"),
        ("nfd_namespace", "dns1123_label"),
        ("nfd_chart_version", "chart_version"),
        ("nfd_chart_repo_url", "url"),
        ("nfd_x", "duration"),  # the role's own, between
        ("nfd_kubeconfig", "kubeconfig"),
    ]
    assert args["checks"][3]["allow_empty"] is False and args["checks"][-1]["context"] == "lab"


@pytest.mark.parametrize(
    ("extra", "when", "looked_up"),
    [
        ({}, True, True),
        ({"_gpuops_planned_roles": ["gpu_operator"]}, True, False),  # not in the run's plan: its release pulls it
        ({"_gpuops_planned_roles": None}, True, False),  # a role run alone
        ({"nfd_state": "absent"}, True, False),
        ({}, False, False),  # chart_when false: another role installs its chart
    ],
)
def test_the_chart_is_looked_up_only_when_the_plan_installs_it(extra, when, looked_up):
    variables = {k: v for k, v in {**VARS, **extra}.items() if k.startswith("nfd_")}
    assert (chart_lookup("nfd", variables, _resolve(extra), when) is not None) is looked_up


def test_the_mirror_and_its_ca_stand_for_the_roles_repository():
    variables = {k: v for k, v in VARS.items() if k.startswith("nfd_")}
    resolve = _resolve({"gpuops_chart_repo_mirror": "http://127.0.0.1:18879", "gpuops_chart_repo_ca_file": "/ca.pem"})
    chart = chart_lookup("nfd", variables, resolve, True)
    assert chart is not None and (chart["repo_url"], chart["ca_file"]) == ("http://127.0.0.1:18879", "/ca.pem")


def test_given_arguments_are_kept():
    args = chart_role_args(
        {"role": "nfd", "chart_role": True, "variables": {"nfd_state": "absent"}, "options": {}, "prefix": "nfd_"},
        sorted(VARS),
        _resolve(),
        "/nonexistent",  # options given: the spec is not read
    )
    assert args["variables"] == {"nfd_state": "absent"} and args["options"] == {} and "chart" not in args


@pytest.mark.parametrize(
    "role",
    [
        "nfd",
        "gpu_operator",
        "amd_gpu_operator",
        "network_operator",
        "sriov_network_operator",
        "kueue",
        "volcano",
        "kai_scheduler",
        "monitoring",
    ],
)
def test_every_chart_role_uses_it_and_spells_out_no_standard_check(role):
    text = (REPO / "roles" / role / "tasks" / "inputs.yml").read_text()
    assert "chart_role: true" in text
    for var in ("release_name", "chart_version", "chart_repo_url", "kubeconfig"):
        assert f"{{var: {role}_{var}," not in text

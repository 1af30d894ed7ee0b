"""roles/network_operator/defaults/main.yml and plugins/module_utils/network/_network.py DEFAULTS say the same: the
role's defaults are what the builders and rules assume when a variable is not given (one default, two places that must
not drift)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1].parent
sys.path.insert(0, str(REPO / ".state" / "collections"))

from ansible_collections.gpuops.platform.plugins.module_utils.network import (  # noqa: E402
    _network,
    _network_inputs,
)

DEFAULTS = yaml.safe_load((REPO / "roles/network_operator/defaults/main.yml").read_text())
GPUOPS = yaml.safe_load((REPO / "roles/gpuops/defaults/main.yml").read_text())


def test_every_network_default_is_a_role_default_with_the_same_value():
    role = {k.removeprefix(_network.PREFIX): v for k, v in DEFAULTS.items()}
    for key, value in _network.DEFAULTS.items():
        assert key in role, f"{_network.PREFIX}{key} is not a default of the role"
        if key == "nfd_managed":
            # templated: gpuops_nfd_managed, whose default is _network's
            assert role[key] == "{{ gpuops_nfd_managed }}" and GPUOPS["gpuops_nfd_managed"] is value
            continue
        if key == "sriov_bundled":
            # templated: follows sriov_network_operator_source, bundled unless that says standalone (_network's)
            assert (
                role[key] == "{{ sriov_network_operator_source | default('network_operator') == 'network_operator' }}"
            )
            assert value is True
            continue
        assert role[key] == value, f"{_network.PREFIX}{key}: role {role[key]!r} != _network {value!r}"


def test_the_roles_other_variables_are_the_release_and_guard_settings():
    others = {k for k in DEFAULTS if k.removeprefix(_network.PREFIX) not in _network.DEFAULTS}
    assert others == {
        f"{_network.PREFIX}{k}"
        for k in (
            "state",
            "chart_version",
            "chart_repo_url",
            "chart_name",
            "release_name",
            "kubeconfig",
            "wait_timeout",
            "values",
            "host_group",
        )
    }


def test_the_defaults_build_the_documented_policy_and_pass_the_rules():
    variables = {k: v for k, v in DEFAULTS.items() if not (isinstance(v, str) and "{{" in v)}
    cfg = _network.from_variables(variables)
    assert _network_inputs.network_input_findings(cfg) == []
    assert _network.nic_cluster_policy(cfg) == _network.nic_cluster_policy({})
    assert _network.chart_values(cfg) == {"nfd": {"enabled": False}, "sriovNetworkOperator": {"enabled": False}}

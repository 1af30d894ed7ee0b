"""The cluster roles a run's tags select (filter planned_roles): the run's preflight plans those only."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.planned_roles import ROLES, planned_roles


@pytest.mark.parametrize(
    ("run_tags", "skip_tags", "want"),
    [
        (["all"], [], list(ROLES)),
        (["hosts"], [], []),
        (["no-such-layer"], [], []),
        (["always"], [], []),
        (["monitoring"], [], ["monitoring"]),
        (["schedulers"], [], ["kueue", "volcano", "kai_scheduler"]),
        (["batch"], ["volcano"], ["kueue", "kai_scheduler"]),
        (["kueue_install"], [], ["kueue"]),
        (["kai_scheduler"], [], ["kai_scheduler"]),
        (["sharing"], [], ["gpu_sharing", "gpu_operator"]),
        (["network", "smoke"], [], ["network_operator", "sriov_network_operator", "smoke_tests"]),
        (["all"], ["operators", "network", "schedulers", "monitoring", "smoke"], []),
        (["all"], ["kueue_validate"], list(ROLES)),  # skipping a role's validation still applies the role
        (["operators"], [], ["nfd", "gpu_sharing", "gpu_operator", "amd_gpu_operator"]),
    ],
)
def test_the_roles_a_run_applies(run_tags, skip_tags, want):
    assert planned_roles(run_tags, skip_tags) == want


def test_tags_not_a_list_are_refused():
    with pytest.raises(AnsibleFilterError, match="ansible_run_tags"):
        planned_roles("all")


@pytest.mark.parametrize(
    ("switches", "want"),
    [
        ({}, ["nfd", "gpu_operator"]),  # the gpuops role's defaults
        ({"gpuops_nfd_managed": False, "gpuops_gpu_operator_managed": "false"}, []),
        (
            {
                "gpuops_gpu_sharing_managed": "yes",
                "gpuops_monitoring_managed": True,
                "gpuops_batch_schedulers": ["kai_scheduler", "kueue"],
            },
            ["nfd", "gpu_sharing", "gpu_operator", "kueue", "kai_scheduler", "monitoring"],
        ),
        (
            {
                "gpuops_amd_gpu_operator_managed": 1,
                "gpuops_network_operator_managed": True,
                "gpuops_sriov_network_operator_managed": True,
                "gpuops_smoke_tests_managed": True,
                "gpuops_batch_schedulers": ["volcano"],
            },
            [
                "nfd",
                "gpu_operator",
                "network_operator",
                "sriov_network_operator",
                "amd_gpu_operator",
                "volcano",
                "smoke_tests",
            ],
        ),
    ],
)
def test_enabled_leaves_out_the_roles_the_switches_turn_off(switches, want):
    assert planned_roles(["all"], enabled=switches) == want


def test_enabled_and_tags_together():
    switches = {"gpuops_monitoring_managed": True, "gpuops_batch_schedulers": ["kueue"]}
    assert planned_roles(["schedulers", "monitoring"], ["monitoring"], enabled=switches) == ["kueue"]


def test_batch_schedulers_not_a_list_are_refused():
    with pytest.raises(AnsibleFilterError, match="gpuops_batch_schedulers must be a list"):
        planned_roles(["all"], enabled={"gpuops_batch_schedulers": "kueue"})

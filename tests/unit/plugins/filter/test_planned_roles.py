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

"""The exporter restart rule (_owned.pods_started_before, the pods_started_before filter): pods created before the
role's field manager last changed the ConfigMap they read at start."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.pods_started_before import pods_started_before
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

ME = "gpuops-gpu-operator"


def cm(*entries):
    return {"metadata": {"name": "m", "managedFields": [{"manager": m, "time": t} for m, t in entries]}}


def pod(name, created, deleting=False):
    meta = {"name": name, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T01:00:00Z"
    return {"metadata": meta}


PODS = [
    pod("old", "2026-11-26T00:00:00Z"),
    pod("same-second", "2026-11-26T00:10:00Z"),
    pod("new", "2026-11-26T00:20:00Z"),
]


@pytest.mark.parametrize(
    ("config", "pods", "want"),
    [
        (cm((ME, "2026-11-26T00:10:00Z")), PODS, ["old"]),  # the same second counts as after
        (cm((ME, "2026-11-26T00:30:00Z")), PODS, ["new", "old", "same-second"]),  # a run that failed before restarting
        (cm((ME, "2026-11-25T23:00:00Z")), PODS, []),  # nothing changed since the pods started
        (cm(("kubectl-edit", "2026-11-26T00:30:00Z")), PODS, []),  # another manager's edit is not the role's change
        (cm(("kubectl-edit", "2026-11-26T00:30:00Z"), (ME, "2026-11-26T00:15:00Z")), PODS, ["old", "same-second"]),
        (cm((ME, "2026-11-26T00:30:00Z")), [pod("going", "2026-11-26T00:00:00Z", deleting=True)], []),
        (None, PODS, []),  # no ConfigMap
        ({"metadata": {"name": "m"}}, PODS, []),  # no managedFields
    ],
    ids=["older", "all", "none", "other-manager", "latest-own", "terminating", "no-config", "no-fields"],
)
def test_pods_started_before(config, pods, want):
    assert _owned.pods_started_before(config, pods, ME) == want
    assert pods_started_before(config, pods, ME) == want


@pytest.mark.parametrize(("config", "pods", "manager"), [("cm", [], ME), (None, {}, ME), (None, [], "")])
def test_the_filter_refuses_bad_input(config, pods, manager):
    with pytest.raises(AnsibleFilterError, match="pods_started_before expects"):
        pods_started_before(config, pods, manager)

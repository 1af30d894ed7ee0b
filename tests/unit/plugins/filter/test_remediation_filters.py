"""repair_step and quarantined_nodes as the playbooks call them: the event's fault class and GPU index, what was
tried, and bad ladders named."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.quarantined_nodes import quarantined_nodes
from ansible_collections.gpuops.platform.plugins.filter.repair_step import repair_step

EVENT = {"fault_class": "memory", "gpu": {"index": 3}}


@pytest.mark.parametrize(
    ("event", "args", "step"),
    [
        (EVENT, ([], False, None, True), "reset"),
        (EVENT, (["reset"], False, False, True), "break_fix"),
        (EVENT, (["reset"], True, False, True), "reboot"),
        ({"fault_class": "memory", "gpu": {"index": None}}, ([], False, None, True), "break_fix"),
        ({"fault_class": "memory", "gpu": None}, ([], True, None, True), "reboot"),
        (EVENT, ([], False, None, False), "break_fix"),
        (EVENT, ([], False, None, True, {"memory": ["break_fix"]}), "break_fix"),
    ],
)
def test_repair_step(event, args, step):
    assert repair_step(event, *args)["step"] == step


@pytest.mark.parametrize(
    ("event", "ladder"), [({"gpu": {}}, {}), (EVENT, {"memory": ["pray"]}), (EVENT, {"x": "reset"})]
)
def test_repair_step_refuses(event, ladder):
    with pytest.raises(AnsibleFilterError):
        repair_step(event, [], False, None, True, ladder)


def test_quarantined_nodes():
    nodes = [
        {"metadata": {"name": "b", "labels": {"gpuops.platform/remediation": "notified"}}},
        {
            "metadata": {"name": "a", "labels": {"gpuops.platform/remediation": "quarantined"}},
            "spec": {"unschedulable": True},
        },
        {"metadata": {"name": "c", "labels": {}}},
    ]
    assert [(r["node"], r["state"], r["unschedulable"]) for r in quarantined_nodes(nodes)] == [
        ("a", "quarantined", True),
        ("b", "notified", False),
    ]
    with pytest.raises(AnsibleFilterError):
        quarantined_nodes({"a": 1})

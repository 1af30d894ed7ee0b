"""The end of playbooks/remediate.yml (module_utils/remediation/_report.py), as a table of cases."""

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.remediation._report import remediation_text

PLAN = [
    {"pod": "train-0", "decision": "evict", "why": "owned by a Job"},
    {"pod": "dcgm-exporter-x", "decision": "keep", "why": "DaemonSet"},
]


@pytest.mark.parametrize(
    ("mode", "steps", "plan", "repair", "want"),
    [
        ("act", [], [], None, ["gpuops remediation (act)"]),
        (
            "dry_run",
            [{"msg": "would cordon n1"}, None, {}, {"skipped": True, "changed": False}, {"msg": "would open a ticket"}],
            [],
            {},
            [
                "gpuops remediation (dry_run: nothing was changed but Events)",
                "- would cordon n1",
                "- would open a ticket",
            ],
        ),
        (
            "act",
            [{"msg": "cordoned n1"}, {"msg": "drained n1"}],
            PLAN,
            None,
            [
                "gpuops remediation (act)",
                "- cordoned n1",
                "- drained n1",
                "drain plan of n1:",
                "POD              DECISION  WHY",
                "train-0          evict     owned by a Job",
                "dcgm-exporter-x  keep      DaemonSet",
            ],
        ),
        (
            "act",
            [],
            [],
            {"step": "reboot", "why": "XID 79", "skipped": [["reset", "not allowed"], ["drain", "no pods"]]},
            [
                "gpuops remediation (act)",
                "repair ladder: reboot (XID 79; passed over: reset: not allowed, drain: no pods)",
            ],
        ),
        (
            "act",
            [],
            [],
            {"step": "reset", "why": "XID 48", "skipped": []},
            ["gpuops remediation (act)", "repair ladder: reset (XID 48)"],
        ),
    ],
)
def test_remediation_text(mode, steps, plan, repair, want):
    assert remediation_text(mode, "n1", steps, plan, repair).splitlines() == want

"""The fault policy (plugins/module_utils/_fault_policy.py) against the alert rules it is derived from, and the
committed rulebook against the one it generates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.module_utils import _fault_policy as fp
from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts as ga
from eda_payloads import REPO, alert

sys.path.insert(0, str(REPO / "hack"))
import eda_rulebook  # noqa: E402

# What the policy must say, by the kind of fault (the rule: fatal hardware faults quarantine, throttling only
# labels and notifies, application XIDs do nothing to the node).
FATAL = ("GPUXidMemoryError", "GPUXidNVLinkError", "GPUXidFallenOffBus", "GPUXidHardwareError",
         "GPUUncorrectableECCError", "GPURowRemapFailure", "GPUFallenOffBus")  # fmt: skip
THROTTLING = ("GPUThermalThrottling", "GPUPowerThrottling")


def test_every_alert_has_a_policy():
    assert fp.policy_findings() == []
    assert list(fp.alert_policies()) == list(ga.ALERTS)


def test_findings_name_a_missing_class(monkeypatch):
    monkeypatch.delitem(fp.ALERT_CLASSES, "GPUPCIeReplayStorm")
    monkeypatch.setitem(fp.ALERT_CLASSES, "GPUNoSuchAlert", "bus")
    ids = {(f["id"], f["object"]["name"]) for f in fp.policy_findings()}
    assert ids == {
        ("fault-policy-unclassified", "GPUPCIeReplayStorm"),
        ("fault-policy-alert-unknown", "GPUNoSuchAlert"),
    }


@pytest.mark.parametrize("alert_name", FATAL)
def test_fatal_hardware_faults_quarantine(alert_name):
    assert fp.alert_policies()[alert_name]["action"] == "quarantine"


@pytest.mark.parametrize("alert_name", THROTTLING)
def test_throttling_only_labels(alert_name):
    assert fp.alert_policies()[alert_name]["action"] == "label"


def test_xid_classes_come_from_the_rules():
    policies = fp.alert_policies()
    for group in ga.rule_groups():
        for rule in group["rules"]:
            if "xid_class" in rule["labels"]:
                assert policies[rule["alert"]]["fault_class"] == rule["labels"]["xid_class"]
    for xid_class in ga.XID_CLASSES:
        assert fp.FAULT_CLASSES[xid_class][0] == ("none" if xid_class == "application" else "quarantine")
    assert policies["GPUXidApplicationError"]["action"] == "none"


def test_remediation_event():
    a = alert("GPUXidFallenOffBus", UUID="GPU-1", pci_bus_id="00000000:18:00.0", gpu="3", err_code="79")
    event = fp.remediation_event(a)
    assert event == {
        "node": "gpu-node-1",
        "alert": "GPUXidFallenOffBus",
        "fault_class": "bus",
        "action": "quarantine",
        "severity": "critical",
        "gpu": {"uuid": "GPU-1", "pci_bus_id": "00000000:18:00.0", "index": 3},
        "starts_at": a["startsAt"],
        "fingerprint": a["fingerprint"],
        "labels": a["labels"],
        "annotations": a["annotations"],
        "status": "firing",
    }
    assert fp.remediation_event(alert("GPUXidApplicationError", err_code="13")) is None
    assert fp.remediation_event(alert("GPUXidFallenOffBus", node=None)) is None
    assert fp.remediation_event(alert("KubeNodeNotReady")) is None


@pytest.mark.parametrize("path", [eda_rulebook.RULEBOOK, eda_rulebook.CONTROLLER_RULEBOOK], ids=lambda p: p.name)
def test_committed_rulebook_is_the_generated_one(path):
    committed = path.read_text()
    assert committed == eda_rulebook.render(path), "the rulebook is generated: run make rulebook (hack/eda_rulebook.py)"
    assert yaml.safe_load(committed) == fp.rulebook(controller=path == eda_rulebook.CONTROLLER_RULEBOOK)


def test_the_controller_rulebook_launches_the_job_template_with_the_same_rules_and_vars():
    (local,) = fp.rulebook()
    (controller,) = fp.rulebook(controller=True)
    assert controller["sources"] == local["sources"]
    assert [r["condition"] for r in controller["rules"]] == [r["condition"] for r in local["rules"]]
    for mine, theirs in zip(controller["rules"], local["rules"], strict=True):
        if "run_playbook" not in theirs["action"]:
            assert mine["action"] == theirs["action"]
            continue
        launch, run = mine["action"]["run_job_template"], theirs["action"]["run_playbook"]
        assert launch["job_args"] == {"extra_vars": run["extra_vars"]}
        assert launch["lock"] == run["lock"] == fp.LOCK
        assert fp.JOB_TEMPLATE in launch["name"] and fp.ORGANIZATION in launch["organization"]


def test_rulebook_conditions_follow_the_table():
    (ruleset,) = fp.rulebook()
    rules = {r["name"]: r for r in ruleset["rules"]}
    assert len(rules) == len(ruleset["rules"]), "rule names must be unique"
    for name, policy in fp.alert_policies().items():
        (rule,) = [r for r in ruleset["rules"] if f'alertname == "{name}"' in r["condition"]]
        if policy["action"] == "none":
            assert "run_playbook" not in rule["action"]
            continue
        run = rule["action"]["run_playbook"]
        assert (
            rule["condition"] == f'event.alert.labels.alertname == "{name}" and event.alert.labels.Hostname is defined'
        )
        assert run["lock"] == fp.LOCK
        event = run["extra_vars"]["gpuops_remediation_event"]
        assert (event["fault_class"], event["action"]) == (policy["fault_class"], policy["action"])
    assert Path(REPO, "extensions/eda/plugins/event_source/alertmanager.py").is_file()
    assert fp.SOURCE in ruleset["sources"][0]

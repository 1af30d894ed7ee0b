"""The generated rulebook run by the real ansible-rulebook (1.3.2, requirements/dev.txt; Java 17) with the
collection's Alertmanager source: one Alertmanager notification carrying every GPU alert of the collection (an
XID 79 among them), plus an alert of another rule and a fatal one without a node. The remediation playbook is a
stub (rulebook variable gpuops_remediation_playbook) that records the variables it was run with. Every alert the
fault policy acts on runs it once with the contract's event (the same as _fault_policy.remediation_event computes),
the others never do; repeats and bad bodies change nothing and the source keeps running."""

from __future__ import annotations

import json
import time

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils import _fault_policy as fp
from eda_payloads import alert, free_port, gpu_alert, notification
from gpuops_lab import eda
from gpuops_lab.eda import post


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    rulebook = eda.start(tmp_path_factory.mktemp("eda"), free_port())
    yield rulebook
    rulebook.stop()


def test_every_gpu_alert_as_the_policy_says(engine):
    policies = fp.alert_policies()
    alerts = [gpu_alert(name, i) for i, name in enumerate(policies)]
    alerts.append(alert("KubeNodeNotReady", node=None, node_label="dgx-0"))
    alerts.append(alert("GPUXidHardwareError", node=None, UUID="GPU-x", err_code="119"))
    acting = {a["labels"]["alertname"]: a for a in alerts[: len(policies)] if fp.remediation_event(a) is not None}
    assert "GPUXidFallenOffBus" in acting and "GPUThermalThrottling" in acting

    assert post(f"{engine.url}/alerts", json.dumps(notification(*alerts)).encode()) == 200
    # the rulebook runs the playbooks one after the other: on a loaded machine (make test's four streams) each
    # takes seconds, so wait for all of them, then for no run to be in progress or to start for a while
    engine.wait_recorded(len(acting), 600)
    assert engine.settle(quiet=3, timeout=600), "the rulebook still runs playbooks after 600 s"
    got = {alert_name: record for (alert_name, _node), record in engine.recorded().items()}
    assert sorted(got) == sorted(acting)
    for name, a in acting.items():
        assert got[name] == {"mode": fp.DEFAULT_MODE, "event": fp.remediation_event(a)}, name
    xid79 = got["GPUXidFallenOffBus"]["event"]
    assert (xid79["node"], xid79["action"], xid79["labels"]["err_code"]) == ("dgx-2", "quarantine", "79")
    assert xid79["gpu"] == {"uuid": "GPU-00000002-7d4b", "pci_bus_id": "00000000:12:00.0", "index": 2}
    assert got["GPUThermalThrottling"]["event"]["action"] == "label"
    assert got["GPUPowerThrottling"]["event"]["action"] == "label"
    assert "GPUXidApplicationError" not in got

    text = engine.log.read_text()
    assert "GPUXidApplicationError firing on dgx-4: no action" in text
    assert "KubeNodeNotReady is not a GPU alert of gpuops.platform: ignored" in text
    assert "GPUXidHardwareError has no Hostname label" in text


def test_repeats_and_bad_bodies_change_nothing(engine):
    url, records = engine.url, engine.records
    assert engine.settle(quiet=3, timeout=600), "the rulebook still runs playbooks after 600 s"
    before = {p.name: p.stat().st_mtime_ns for p in records.glob("*.json")}
    assert before, "runs after test_every_gpu_alert_as_the_policy_says"
    assert post(f"{url}/alerts", b"{not json") == 400
    assert post(f"{url}/alerts", json.dumps({"alerts": [{"status": "firing"}]}).encode()) == 400
    again = notification(gpu_alert("GPUXidFallenOffBus", 2))  # the same alert again: a repeat
    assert post(f"{url}/alerts", json.dumps(again).encode()) == 200
    time.sleep(5)
    assert engine.settle(quiet=3, timeout=600), "the rulebook still runs playbooks after 600 s"
    assert {p.name: p.stat().st_mtime_ns for p in records.glob("*.json")} == before
    assert engine.proc.poll() is None
    resolved = notification({**gpu_alert("GPUXidFallenOffBus", 2), "status": "resolved"})
    assert post(f"{url}/alerts", json.dumps(resolved).encode()) == 200
    got = {}
    deadline = time.monotonic() + 600  # one playbook run after the repeat's none: seconds, more under load
    while time.monotonic() < deadline:
        got = json.loads((records / "GPUXidFallenOffBus@dgx-2.json").read_text())
        if got["event"]["status"] == "resolved":
            break
        time.sleep(0.5)
    assert got["event"]["status"] == "resolved"

"""The generated rulebook run by the real ansible-rulebook (1.3.2, requirements/dev.txt; Java 17) with the
collection's Alertmanager source: one Alertmanager notification carrying every GPU alert of the collection (an
XID 79 among them), plus an alert of another rule and a fatal one without a node. The remediation playbook is a
stub (rulebook variable gpuops_remediation_playbook) that records the variables it was run with. Every alert the
fault policy acts on runs it once with the contract's event (the same as _fault_policy.remediation_event computes),
the others never do; repeats and bad bodies change nothing and the source keeps running."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils import _fault_policy as fp
from conftest import REPO, alert, notification

RULEBOOK = REPO / "extensions" / "eda" / "rulebooks" / "gpu_health.yml"
STUB = """\
- name: Record the remediation request (test stub)
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write the variables received
      ansible.builtin.copy:
        dest: "{{ lookup('env', 'GPUOPS_TEST_RECORDS') }}/{{ gpuops_remediation_event.alert }}.json"
        content: "{{ {'mode': gpuops_remediation_mode, 'event': gpuops_remediation_event} | to_json }}"
        mode: "0644"
"""


def _ansible_rulebook() -> Path:
    path = Path(sys.executable).parent / "ansible-rulebook"
    assert path.is_file(), f"ansible-rulebook not found at {path}: install requirements/dev.txt (make venv)"
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: bytes) -> int:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - loopback
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _gpu_alert(name: str, i: int) -> dict:
    policy = fp.alert_policies()[name]
    labels = {"UUID": f"GPU-{i:08x}-7d4b", "pci_bus_id": f"00000000:{16 + i:02X}:00.0", "gpu": str(i % 8)}
    if name.startswith("GPUXid"):
        labels["err_code"] = "79" if name == "GPUXidFallenOffBus" else "13" if "Application" in name else "48"
    return alert(name, node=f"dgx-{i}", severity=policy["severity"], **labels)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eda")
    records = tmp / "records"
    records.mkdir()
    port = _free_port()
    (tmp / "remediate_stub.yml").write_text(STUB)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp / "inventory.yml").write_text(json.dumps({"all": {"hosts": {"localhost": local}}}))
    (tmp / "vars.yml").write_text(
        json.dumps({"gpuops_eda_port": port, "gpuops_remediation_playbook": str(tmp / "remediate_stub.yml")})
    )
    env = {**os.environ, "GPUOPS_TEST_RECORDS": str(records), "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log = (tmp / "ansible-rulebook.log").open("w")
    argv = [
        str(_ansible_rulebook()),
        "-r",
        str(RULEBOOK),
        "-i",
        str(tmp / "inventory.yml"),
        "-e",
        str(tmp / "vars.yml"),
    ]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)  # noqa: S603
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, (
            f"ansible-rulebook exited {proc.returncode}: {(tmp / 'ansible-rulebook.log').read_text()}"
        )
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as resp:  # noqa: S310 - loopback
                if resp.read() == b"ok":
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the source did not listen within 90 s"
        time.sleep(0.5)
    yield url, records, tmp / "ansible-rulebook.log", proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _wait_records(records: Path, count: int, timeout: float = 180) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while len(list(records.glob("*.json"))) < count and time.monotonic() < deadline:
        time.sleep(0.5)
    return {p.stem: json.loads(p.read_text()) for p in records.glob("*.json")}


def test_every_gpu_alert_as_the_policy_says(engine):
    url, records, log, proc = engine
    policies = fp.alert_policies()
    alerts = [_gpu_alert(name, i) for i, name in enumerate(policies)]
    alerts.append(alert("KubeNodeNotReady", node=None, node_label="dgx-0"))
    alerts.append(alert("GPUXidHardwareError", node=None, UUID="GPU-x", err_code="119"))
    acting = {a["labels"]["alertname"]: a for a in alerts[: len(policies)] if fp.remediation_event(a) is not None}
    assert "GPUXidFallenOffBus" in acting and "GPUThermalThrottling" in acting

    assert _post(f"{url}/alerts", json.dumps(notification(*alerts)).encode()) == 200
    got = _wait_records(records, len(acting))
    time.sleep(3)  # anything that should not have run has had time to
    got = _wait_records(records, 0)
    assert sorted(got) == sorted(acting)
    for name, a in acting.items():
        assert got[name] == {"mode": fp.DEFAULT_MODE, "event": fp.remediation_event(a)}, name
    xid79 = got["GPUXidFallenOffBus"]["event"]
    assert (xid79["node"], xid79["action"], xid79["labels"]["err_code"]) == ("dgx-2", "quarantine", "79")
    assert xid79["gpu"] == {"uuid": "GPU-00000002-7d4b", "pci_bus_id": "00000000:12:00.0", "index": 2}
    assert got["GPUThermalThrottling"]["event"]["action"] == "label"
    assert got["GPUPowerThrottling"]["event"]["action"] == "label"
    assert "GPUXidApplicationError" not in got

    text = log.read_text()
    assert "GPUXidApplicationError firing on dgx-4: no action" in text
    assert "KubeNodeNotReady is not a GPU alert of gpuops.platform: ignored" in text
    assert "GPUXidHardwareError has no Hostname label" in text


def test_repeats_and_bad_bodies_change_nothing(engine):
    url, records, log, proc = engine
    before = {p.name: p.stat().st_mtime_ns for p in records.glob("*.json")}
    assert before, "runs after test_every_gpu_alert_as_the_policy_says"
    assert _post(f"{url}/alerts", b"{not json") == 400
    assert _post(f"{url}/alerts", json.dumps({"alerts": [{"status": "firing"}]}).encode()) == 400
    again = notification(_gpu_alert("GPUXidFallenOffBus", 2))  # the same alert again: a repeat
    assert _post(f"{url}/alerts", json.dumps(again).encode()) == 200
    time.sleep(5)
    assert {p.name: p.stat().st_mtime_ns for p in records.glob("*.json")} == before
    assert proc.poll() is None
    resolved = notification({**_gpu_alert("GPUXidFallenOffBus", 2), "status": "resolved"})
    assert _post(f"{url}/alerts", json.dumps(resolved).encode()) == 200
    got = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = json.loads((records / "GPUXidFallenOffBus.json").read_text())
        if got["event"]["status"] == "resolved":
            break
        time.sleep(0.5)
    assert got["event"]["status"] == "resolved"

"""The collection's Event-Driven Ansible rulebook run by the real ansible-rulebook, for tests: start() runs
``extensions/eda/rulebooks/gpu_health.yml`` with its Alertmanager source on a given port, with a stub remediation
playbook (rulebook variable gpuops_remediation_playbook) that records, per alert and node, the variables it was last
run with (``gpuops_remediation_mode`` and ``gpuops_remediation_event``) as JSON in ``<workdir>/records``.

ansible-rulebook (requirements/dev.txt) is taken from the running interpreter's bin directory; it needs Java 17
(hack/host-deps.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import HACK
from .errors import LabError

RULEBOOK = HACK.parent / "extensions" / "eda" / "rulebooks" / "gpu_health.yml"
STUB = """\
- name: Record the remediation request (test stub)
  hosts: localhost
  gather_facts: false
  vars:
    ev: "{{ gpuops_remediation_event }}"
  tasks:
    - name: Write the variables received
      ansible.builtin.copy:
        dest: "{{ lookup('env', 'GPUOPS_EDA_RECORDS') }}/{{ ev.alert }}@{{ ev.node }}.json"
        content: "{{ {'mode': gpuops_remediation_mode, 'event': gpuops_remediation_event} | to_json }}"
        mode: "0644"
"""


def ansible_rulebook() -> Path:
    path = Path(sys.executable).parent / "ansible-rulebook"
    if not path.is_file():
        raise LabError(f"ansible-rulebook not found at {path}: install requirements/dev.txt (make venv)")
    return path


def post(url: str, body: bytes) -> int:
    """POST a body to the source; the HTTP status."""
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - loopback
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@dataclass
class Rulebook:
    proc: subprocess.Popen
    url: str  # the source's base URL
    records: Path
    log: Path

    def recorded(self) -> dict[tuple[str, str], dict[str, Any]]:
        """(alert name, node) -> {mode, event} the stub playbook was last run with."""
        out = {}
        for p in self.records.glob("*.json"):
            alert, _sep, node = p.stem.partition("@")
            try:
                out[alert, node] = json.loads(p.read_text())
            except json.JSONDecodeError:  # being written
                continue
        return out

    def wait_recorded(self, count: int, timeout: float) -> dict[tuple[str, str], dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.recorded()) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.recorded()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start(workdir: Path, port: int, rulebook_vars: dict[str, Any] | None = None, timeout: float = 90) -> Rulebook:
    """ansible-rulebook with the collection's rulebook, its source on 127.0.0.1:port, the stub playbook; returns once
    the source answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    records = workdir / "records"
    records.mkdir(exist_ok=True)
    (workdir / "remediate_stub.yml").write_text(STUB)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (workdir / "inventory.yml").write_text(json.dumps({"all": {"hosts": {"localhost": local}}}))
    variables = {"gpuops_eda_port": port, "gpuops_remediation_playbook": str(workdir / "remediate_stub.yml")}
    (workdir / "vars.yml").write_text(json.dumps({**variables, **(rulebook_vars or {})}))
    env = {**os.environ, "GPUOPS_EDA_RECORDS": str(records), "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-tmp")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log = workdir / "ansible-rulebook.log"
    argv = [str(ansible_rulebook()), "-r", str(RULEBOOK), "-i", "inventory.yml", "-e", "vars.yml"]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir)  # noqa: S603
    rb = Rulebook(proc, f"http://127.0.0.1:{port}", records, log)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise LabError(f"ansible-rulebook exited {proc.returncode}: {log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{rb.url}/healthz", timeout=2) as resp:  # noqa: S310 - loopback
                if resp.read() == b"ok":
                    return rb
        except OSError:
            pass
        if time.monotonic() > deadline:
            rb.stop()
            raise LabError(
                f"the rulebook's source did not answer on {rb.url} within {timeout:.0f}s: {log.read_text()[-4000:]}"
            )
        time.sleep(0.5)

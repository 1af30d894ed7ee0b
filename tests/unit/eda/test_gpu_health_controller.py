"""The controller rulebook (gpu_health_controller.yml) run by the real ansible-rulebook (1.3.2; Java 17) against a
fake AWX controller that answers the calls of ansible-rulebook's job template runner (``job_template_runner.py``,
``shared_job_monitor.py``) as AWX 24.6 does, from the job templates of awx/job_templates.yml: ``GET
api/v2/config/`` at start, ``GET api/v2/unified_job_templates/?name=``, ``POST`` to the template's launch URL (AWX
refuses extra vars a template does not prompt for, with its message), ``GET api/v2/jobs/?id__in=`` until the job is
done; a bearer token is required. One Alertmanager notification with every GPU alert launches "gpuops - remediate"
once per alert the fault policy acts on, with the contract's event; an application XID launches nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.module_utils import _fault_policy as fp
from eda_payloads import REPO, alert, free_port, gpu_alert, notification
from gpuops_lab.eda import ansible_rulebook, post

RULEBOOK = REPO / "extensions/eda/rulebooks/gpu_health_controller.yml"
TOKEN = "eda-test-token"  # noqa: S105 - the fake controller's
LAUNCH = re.compile(r"^/api/v2/job_templates/(\d+)/launch/$")
REMEDIATION_TEMPLATES = (
    "gpuops - remediate",
    "gpuops - quarantine",
    "gpuops - drain",
    "gpuops - repair",
    "gpuops - return",
)


def _awx() -> dict[str, Any]:
    return yaml.safe_load((REPO / "awx/job_templates.yml").read_text())


@dataclass
class FakeController:
    """The AWX API a rulebook's run_job_template calls, over awx/job_templates.yml's job templates."""

    templates: dict[int, dict[str, Any]]
    organization: str
    launches: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    polls: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def summary(self, tid: int) -> dict[str, Any]:
        t = self.templates[tid]
        return {
            "id": tid,
            "type": "job_template",
            "name": t["name"],
            "summary_fields": {"organization": {"name": self.organization}},
            "related": {"launch": f"/api/v2/job_templates/{tid}/launch/"},
            **{k: bool(t.get(k)) for k in ("ask_limit_on_launch", "ask_labels_on_launch", "ask_inventory_on_launch")},
            "ask_variables_on_launch": bool(t.get("ask_variables_on_launch")),
        }

    def launch(self, tid: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        t = self.templates[tid]
        extra = body.get("extra_vars") or {}
        with self.lock:
            if extra and not t.get("ask_variables_on_launch"):
                # AWX: without "prompt on launch" for variables, only a survey's variables are accepted
                survey = {q["variable"] for q in (t.get("survey_spec") or {}).get("spec", [])}
                extra_names = sorted(set(extra) - survey)
                if extra_names:
                    self.refused.append({"template": t["name"], "body": body})
                    msg = (
                        f"Variables {', '.join(extra_names)} are not allowed on launch. Check the Prompt on Launch "
                        "setting on the Job Template to include Extra Variables."
                    )
                    return 400, {"extra_vars": [msg]}
            job = len(self.launches) + 1
            self.launches.append({"template": t["name"], "job": job, "body": body})
        ignored = {k: body[k] for k in ("limit",) if k in body and not t.get(f"ask_{k}_on_launch")}
        return 201, {
            "id": job,
            "job": job,
            "url": f"/api/v2/jobs/{job}/",
            "status": "pending",
            "ignored_fields": ignored,
        }

    def jobs(self, ids: list[int]) -> dict[str, Any]:
        results = []
        with self.lock:
            for job in ids:
                self.polls[job] = self.polls.get(job, 0) + 1
                status = "running" if self.polls[job] == 1 else "successful"  # one poll sees it running
                results.append({"id": job, "status": status, "created": "2026-11-28T08:00:01Z", "artifacts": {}})
        return {"count": len(results), "next": None, "results": results}


def _handler(ctl: FakeController) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if self.headers.get("Authorization") == f"Bearer {TOKEN}":
                return True
            self._send(401, {"detail": "Authentication credentials were not provided."})
            return False

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if not self._authorized():
                return
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/api/v2/config/":
                self._send(200, {"version": "24.6.1"})
            elif url.path == "/api/v2/unified_job_templates/":
                found = [ctl.summary(i) for i, t in ctl.templates.items() if t["name"] == query.get("name")]
                self._send(200, {"count": len(found), "next": None, "previous": None, "results": found})
            elif url.path == "/api/v2/jobs/":
                self._send(200, ctl.jobs([int(i) for i in query["id__in"].split(",")]))
            else:
                self._send(404, {"detail": "Not found."})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if not self._authorized():
                return
            m = LAUNCH.match(self.path)
            if not m or int(m.group(1)) not in ctl.templates:
                self._send(404, {"detail": "Not found."})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            self._send(*ctl.launch(int(m.group(1)), body))

    return Handler


@dataclass
class Activation:
    controller: FakeController
    source: str  # the Alertmanager source's URL
    log: Path
    proc: subprocess.Popen


@pytest.fixture(scope="module")
def activation(tmp_path_factory) -> Iterator[Activation]:
    awx = _awx()
    ctl = FakeController(dict(enumerate(awx["job_templates"], start=7)), awx["organization"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ctl))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = tmp_path_factory.mktemp("eda-controller")
    port = free_port()
    (work / "vars.yml").write_text(json.dumps({"gpuops_eda_port": port}))
    env = {
        **os.environ,
        "EDA_CONTROLLER_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "EDA_CONTROLLER_TOKEN": TOKEN,
        "EDA_JOB_TEMPLATE_REFRESH_DELAY": "0.2",  # the job monitor's poll interval (10 s by default)
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log = work / "ansible-rulebook.log"
    with log.open("w") as out:
        proc = subprocess.Popen(  # noqa: S603
            [str(ansible_rulebook()), "-r", str(RULEBOOK), "-e", "vars.yml"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=work,
        )
    act = Activation(ctl, f"http://127.0.0.1:{port}", log, proc)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"ansible-rulebook exited {proc.returncode}: {log.read_text()[-4000:]}"
            try:
                with urllib.request.urlopen(f"{act.source}/healthz", timeout=2) as resp:  # noqa: S310 - loopback
                    if resp.read() == b"ok":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the source never answered: {log.read_text()[-4000:]}"
            time.sleep(0.5)
        yield act
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        server.shutdown()
        server.server_close()


def test_remediation_templates_accept_the_event_as_extra_vars():
    awx = _awx()
    templates = {t["name"]: t for t in awx["job_templates"]}
    assert fp.JOB_TEMPLATE in REMEDIATION_TEMPLATES and fp.ORGANIZATION == awx["organization"]
    for name in REMEDIATION_TEMPLATES:
        t = templates[name]
        assert t["playbook"] == "playbooks/remediate.yml", name  # fp.PLAYBOOK, gpuops.platform.remediate
        assert t["ask_variables_on_launch"] is True, name
        # the whole pipeline, or one step of it (the playbook's tags)
        assert t.get("job_tags", "") == ("" if name == fp.JOB_TEMPLATE else name.removeprefix("gpuops - ")), name
    assert (REPO / "playbooks/remediate.yml").is_file() and fp.PLAYBOOK == "gpuops.platform.remediate"


def test_one_launch_per_acting_alert_with_the_event(activation):
    ctl = activation.controller
    policies = fp.alert_policies()
    alerts = [gpu_alert(name, i) for i, name in enumerate(policies)]
    alerts.append(alert("KubeNodeNotReady", node=None, node_label="dgx-0"))
    acting = {a["labels"]["alertname"]: a for a in alerts if fp.remediation_event(a) is not None}
    assert "GPUXidFallenOffBus" in acting and "GPUXidApplicationError" not in acting

    assert post(f"{activation.source}/alerts", json.dumps(notification(*alerts)).encode()) == 200
    deadline = time.monotonic() + 120
    while len(ctl.launches) < len(acting) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # anything that should not have launched has had time to
    assert not ctl.refused, ctl.refused
    got = {}
    for launch in ctl.launches:
        extra = launch["body"]["extra_vars"]
        event = extra["gpuops_remediation_event"]
        assert launch["template"] == fp.JOB_TEMPLATE
        assert launch["body"]["limit"] == "all"  # the rule set's hosts; AWX ignores it without the prompt
        assert event["alert"] not in got, f"launched twice for {event['alert']}"
        got[event["alert"]] = extra
    assert sorted(got) == sorted(acting), activation.log.read_text()[-4000:]
    for name, a in acting.items():
        assert got[name]["gpuops_remediation_event"] == fp.remediation_event(a), name
        assert got[name]["gpuops_remediation_mode"] == fp.DEFAULT_MODE
        assert got[name]["ansible_eda"]["event"]["alert"]["labels"]["alertname"] == name  # ansible-rulebook's own
    # every launched job was followed to its end: polled while running, then successful
    assert all(ctl.polls.get(launch["job"], 0) >= 2 for launch in ctl.launches), ctl.polls
    text = activation.log.read_text()
    assert "GPUXidApplicationError firing on dgx-4: no action" in text
    assert "KubeNodeNotReady is not a GPU alert of gpuops.platform: ignored" in text
    assert activation.proc.poll() is None


def test_repeats_launch_nothing(activation):
    ctl = activation.controller
    before = len(ctl.launches)
    assert before, "runs after test_one_launch_per_acting_alert_with_the_event"
    again = notification(gpu_alert("GPUXidFallenOffBus", 2))
    assert post(f"{activation.source}/alerts", json.dumps(again).encode()) == 200
    time.sleep(3)
    assert len(ctl.launches) == before

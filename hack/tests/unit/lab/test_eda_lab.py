"""The lab's rulebook process (gpuops_lab.eda): the inventory and variables it is started with, the lab process
``eda`` (up/down/status, with a stand-in for ansible-rulebook that answers the source's /healthz) and its CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from gpuops_lab import __main__ as cli
from gpuops_lab import eda, monitoring
from gpuops_lab.config import LabConfig
from gpuops_lab.errors import LabError
from gpuops_lab.procs import port_free

# answers GET /healthz with "ok" on the port of the rulebook variables file given with -e, as the source does
FAKE = """#!{python}
import http.server, json, sys
port = json.load(open(sys.argv[sys.argv.index("-e") + 1]))["gpuops_eda_port"]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    import random

    # a free port for the webhook, below the kernel's ephemeral range (the lab refuses ports inside it)
    free = next((p for p in random.sample(range(21000, 32000), 200) if port_free(p)), None)
    assert free is not None, "no free port among 200 tried in 21000-32000"
    monkeypatch.setenv("GPUOPS_LAB_EDA_WEBHOOK_PORT", str(free))
    c = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "lab"), "GPUOPS_CACHE": str(tmp_path / "c")})
    c.state.mkdir(parents=True)
    c.kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    fake = tmp_path / "ansible-rulebook"
    fake.write_text(FAKE.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setattr(eda, "ansible_rulebook", lambda: fake)
    yield c
    eda.down(c)


def test_the_inventory_is_the_labs_controller_and_no_gpu_host(tmp_path):
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path)})
    inv = eda.inventory(cfg, {"gpuops_remediation_namespace": "ops"})
    controller = inv["all"]["children"]["cluster_controller"]["hosts"]["localhost"]
    assert controller["ansible_connection"] == "local"
    assert controller["gpuops_kubeconfig"] == str(tmp_path / "kubeconfig")
    assert controller["gpuops_remediation_namespace"] == "ops"
    # the smoke test that re-validates a node lands on the lab's kwok nodes, GPU taints still tolerated
    assert {t["key"] for t in controller["smoke_tests_tolerations"]} == {
        "kwok.x-k8s.io/node",
        "nvidia.com/gpu",
        "amd.com/gpu",
    }
    assert inv["all"]["children"]["gpu_nodes"] == {"hosts": {}}  # no host connection: the ladder ends in break-fix
    assert "gpuops_kubeconfig" not in eda.inventory(None)["all"]["children"]["cluster_controller"]["hosts"]["localhost"]


def test_prepare_writes_the_real_playbook_and_mode(tmp_path, monkeypatch):
    monkeypatch.setattr(eda, "ansible_rulebook", lambda: Path("/bin/ansible-rulebook"))
    argv, env = eda.prepare(tmp_path / "w", 5099, "act", eda.REAL, eda.inventory(None))
    variables = json.loads((tmp_path / "w" / "vars.yml").read_text())
    assert variables == {
        "gpuops_eda_port": 5099,
        "gpuops_remediation_playbook": "gpuops.platform.remediate",
        "gpuops_remediation_mode": "act",
    }
    assert argv[:3] == ["/bin/ansible-rulebook", "-r", str(eda.RULEBOOK)]
    assert env["ANSIBLE_CONFIG"].endswith("ansible.cfg") and Path(env["ANSIBLE_CONFIG"]).is_file()
    assert not (tmp_path / "w" / "remediate_stub.yml").exists()
    # no playbook named: the stub, recording what it was run with
    eda.prepare(tmp_path / "s", 5099)
    stub = json.loads((tmp_path / "s" / "vars.yml").read_text())["gpuops_remediation_playbook"]
    assert stub == str(tmp_path / "s" / "remediate_stub.yml") and Path(stub).is_file()


def test_an_unknown_mode_is_refused(tmp_path):
    with pytest.raises(LabError, match="one of dry_run, act"):
        eda.prepare(tmp_path, 5099, "yolo")


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ([], {}),
        (["gpuops_remediation_namespace=ops"], {"gpuops_remediation_namespace": "ops"}),
        (["gpuops_remediation_drain={timeout: 60}"], {"gpuops_remediation_drain": {"timeout": 60}}),
        (["gpuops_allow_reboot=true", "x="], {"gpuops_allow_reboot": True, "x": ""}),
    ],
)
def test_parse_vars(words, expected):
    assert eda.parse_vars(words) == expected


@pytest.mark.parametrize("word", ["novalue", "=1", " =x"])
def test_parse_vars_refuses_words_without_a_key(word):
    with pytest.raises(LabError, match="is not KEY=VALUE"):
        eda.parse_vars([word])


def test_up_needs_the_lab(tmp_path):
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "none")})
    with pytest.raises(LabError, match="start the lab first"):
        eda.up(cfg)


def test_up_status_down(cfg):
    assert eda.status(cfg) == {"running": False, "pid": None}
    st = eda.up(cfg, "act", {"gpuops_remediation_namespace": "ops"}, say=lambda m: None)
    port = monitoring.port(cfg, "eda-webhook")
    assert (st["mode"], st["port"], st["playbook"], st["url"]) == ("act", port, eda.REAL, f"http://127.0.0.1:{port}")
    now = eda.status(cfg)
    assert now["running"] and now["pid"] == st["pid"] and now["mode"] == "act"
    inv = yaml.safe_load((cfg.state / "eda" / "inventory.yml").read_text())
    assert inv["all"]["children"]["cluster_controller"]["hosts"]["localhost"]["gpuops_remediation_namespace"] == "ops"
    # the same again: kept; another mode: restarted in it
    assert eda.up(cfg, "act", {"gpuops_remediation_namespace": "ops"}, say=lambda m: None)["pid"] == st["pid"]
    again = eda.up(cfg, "dry_run", say=lambda m: None)
    assert again["pid"] != st["pid"] and eda.status(cfg)["mode"] == "dry_run"
    assert eda.down(cfg) is True
    assert eda.status(cfg) == {"running": False, "pid": None}
    assert eda.down(cfg) is False


def test_up_refuses_a_taken_port(cfg):
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", monitoring.port(cfg, "eda-webhook")))
        s.listen()
        with pytest.raises(LabError, match="GPUOPS_LAB_EDA_WEBHOOK_PORT"):
            eda.up(cfg, say=lambda m: None)


def test_cli(cfg, monkeypatch, capsys):
    monkeypatch.setenv("GPUOPS_LAB_STATE", str(cfg.state))
    monkeypatch.setenv("GPUOPS_CACHE", str(cfg.cache))
    assert cli.main(["eda", "status"]) == 1
    assert cli.main(["eda", "up", "--mode", "act", "-e", "gpuops_remediation_namespace=ops"]) == 0
    assert cli.main(["eda", "status"]) == 0
    out = capsys.readouterr().out
    assert '"mode": "act"' in out and '"running": true' in out
    assert cli.main(["eda", "up", "-e", "broken"]) == 2
    assert cli.main(["eda", "down"]) == 0
    assert "eda: stopped" in capsys.readouterr().out


def test_idle_and_settle_read_the_runs_in_the_rulebooks_output(tmp_path):
    log = tmp_path / "log"
    rb = eda.Rulebook(proc=None, url="", records=tmp_path, log=log)  # type: ignore[arg-type]
    log.write_text("PLAY [The cluster controller - exactly one host]\nTASK ...\n")
    assert not rb.idle()
    assert rb.settle(quiet=0.1, timeout=1) is False
    log.write_text(log.read_text() + "PLAY RECAP ***\nPLAY [Record the remediation request (test stub)]\nPLAY RECAP\n")
    assert rb.idle()
    assert rb.settle(quiet=0.1, timeout=1) is True


def test_stop_ends_the_runs_the_rulebook_started_in_sessions_of_their_own(tmp_path):
    """ansible-runner starts each playbook run in a session of its own: stop() must end it with the rulebook."""
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\n"
        f"open({str(tmp_path / 'child')!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)  # noqa: S603
    pid_file = tmp_path / "child"
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the stand-in rulebook did not start its run"
        time.sleep(0.1)
    child = int(pid_file.read_text())
    assert child in eda._descendants(proc.pid)
    eda.Rulebook(proc=proc, url="", records=tmp_path, log=tmp_path / "log").stop()
    assert proc.poll() is not None
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and "Z" not in Path(f"/proc/{child}/stat").read_text().split()[2]:
        assert time.monotonic() < deadline, "the run the rulebook started outlived stop()"
        time.sleep(0.1)

"""The collection's Event-Driven Ansible rulebook run by the real ansible-rulebook: ``extensions/eda/rulebooks/
gpu_health.yml`` with its Alertmanager source on a given port (rulebook variable gpuops_eda_port).

Two playbooks (rulebook variable gpuops_remediation_playbook):

- the real one, ``gpuops.platform.remediate`` (playbooks/remediate.yml), in dry_run or act mode, on an inventory of
  the lab's cluster controller (localhost, the lab's kubeconfig) and no GPU host, so that the repair ladder ends in
  break-fix (no host-prep connection to reset a GPU through). up()/down()/status() run it as the lab process ``eda``
  on the port the lab's Alertmanager routes the GPU alerts to (monitoring.PORTS ``eda-webhook``): ``python -m
  gpuops_lab eda up --mode act``; start(..., playbook=REAL) runs it for a test;
- a stub, for tests of the event half alone: it records, per alert and node, the variables it was last run with
  (``gpuops_remediation_mode`` and ``gpuops_remediation_event``) as JSON in ``<workdir>/records``.

ansible-rulebook (requirements/dev.txt) is taken from the running interpreter's bin directory; it needs Java 17
(hack/host-deps.sh)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import HACK, LabConfig
from .errors import LabError
from .procs import Proc, port_free, wait_until

RULEBOOK = HACK.parent / "extensions" / "eda" / "rulebooks" / "gpu_health.yml"
REAL = "gpuops.platform.remediate"  # the collection's playbook (playbooks/remediate.yml)
MODES = ("dry_run", "act")
PROC = "eda"  # the lab process's name (pid and log files)
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

    def idle(self) -> bool:
        """No playbook run in progress: as many runs finished (their PLAY RECAP) as started (the controller check,
        the first play of remediate.yml and the stub's only play) in the rulebook's output."""
        text = self.log.read_text(errors="replace")
        started = text.count("PLAY [The cluster controller") + text.count("PLAY [Record the remediation request")
        return started == text.count("PLAY RECAP")

    def settle(self, quiet: float = 10, timeout: float = 180) -> bool:
        """Wait until no playbook run is in progress and none starts for `quiet` seconds (Alertmanager delivers what
        it still holds, e.g. an earlier test's resolved alerts, to a new rulebook); False after timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while not self.idle():
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.5)
            calm = time.monotonic() + quiet
            while self.idle() and time.monotonic() < calm:
                time.sleep(0.5)
            if self.idle():
                return True
        return False

    def stop(self) -> None:
        """Stop the rulebook and every playbook run it started: a run the rulebook left would go on against the lab,
        or hang on its closed output, after the test. ansible-runner starts each run in a session of its own, so the
        runs are found as the rulebook's descendants (before it dies: then they belong to init) and signalled with
        the rulebook's process group."""
        runs = _descendants(self.proc.pid)
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            _signal(self.proc.pid, runs, sig)
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            break
        _signal(self.proc.pid, runs, signal.SIGKILL)  # what ignored SIGTERM


def _descendants(pid: int) -> list[int]:
    """The processes below pid (from /proc; an empty list where it cannot be read)."""
    children: dict[int, list[int]] = {}
    try:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    except OSError:
        return []
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal(group: int, pids: list[int], sig: int) -> None:
    """sig to a process group and to each of pids' groups (a process gone or not ours is skipped)."""
    groups = {group}
    for pid in pids:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(pid))
    for pgid in groups:
        if pgid <= 1 or pgid == os.getpgrp():
            continue
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)


LAB_GROUP_VARS = HACK.parent / "inventories" / "local" / "group_vars" / "cluster_controller.yml"


def lab_tolerations() -> list[dict[str, Any]]:
    """The tolerations the lab's own inventory gives the operators' pods (the kwok taint and the GPU taints):
    inventories/local's ``_gpuops_lab_tolerations``, read, not repeated."""
    import yaml

    return list(yaml.safe_load(LAB_GROUP_VARS.read_text())["_gpuops_lab_tolerations"])


def inventory(cfg: LabConfig | None, controller_vars: dict[str, Any] | None = None) -> dict[str, Any]:
    """The rulebook's inventory: localhost as the cluster controller (local connection, this interpreter, the lab's
    kubeconfig when cfg is given) with controller_vars, and an empty gpu_nodes group (no host connection: the repair
    ladder hands the node to break-fix)."""
    local: dict[str, Any] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    if cfg is not None:
        local["gpuops_kubeconfig"] = str(cfg.kubeconfig)
        # the lab's nodes carry the kwok taint (inventories/local tolerates it the same way): the smoke test that
        # re-validates a node before it returns must be able to land there
        local["smoke_tests_tolerations"] = lab_tolerations()
    local.update(controller_vars or {})
    return {"all": {"children": {"cluster_controller": {"hosts": {"localhost": local}}, "gpu_nodes": {"hosts": {}}}}}


def prepare(
    workdir: Path,
    port: int,
    mode: str = "dry_run",
    playbook: str | None = None,
    inventory_doc: dict[str, Any] | None = None,
    rulebook_vars: dict[str, Any] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Write the rulebook's inventory, variables and (playbook None) the stub into workdir; the ansible-rulebook
    argv (run in workdir) and its environment."""
    if mode not in MODES:
        raise LabError(f"mode {mode!r}: the remediation mode is one of {', '.join(MODES)}")
    workdir.mkdir(parents=True, exist_ok=True)
    records = workdir / "records"
    records.mkdir(exist_ok=True)
    if playbook is None:
        (workdir / "remediate_stub.yml").write_text(STUB)
        playbook = str(workdir / "remediate_stub.yml")
    inv = inventory_doc if inventory_doc is not None else inventory(None)
    (workdir / "inventory.yml").write_text(json.dumps(inv))
    variables = {"gpuops_eda_port": port, "gpuops_remediation_playbook": playbook, "gpuops_remediation_mode": mode}
    (workdir / "vars.yml").write_text(json.dumps({**variables, **(rulebook_vars or {})}))
    env = {**os.environ, "GPUOPS_EDA_RECORDS": str(records), "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-tmp")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # the collection's playbook and modules through the checkout's ansible.cfg (collections_path), wherever
    # ansible-runner runs the playbook from
    env["ANSIBLE_CONFIG"] = str(HACK.parent / "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    argv = [str(ansible_rulebook()), "-r", str(RULEBOOK), "-i", "inventory.yml", "-e", "vars.yml"]
    return argv, env


def _healthz(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as resp:  # noqa: S310 - loopback
            return resp.read() == b"ok"
    except OSError:
        return False


def start(
    workdir: Path,
    port: int,
    rulebook_vars: dict[str, Any] | None = None,
    timeout: float = 180,
    mode: str = "dry_run",
    playbook: str | None = None,
    inventory_doc: dict[str, Any] | None = None,
) -> Rulebook:
    """ansible-rulebook with the collection's rulebook, its source on 127.0.0.1:port, the stub playbook (playbook
    None) or the one named (REAL: the collection's); returns once the source answers."""
    argv, env = prepare(workdir, port, mode, playbook, inventory_doc, rulebook_vars)
    log = workdir / "ansible-rulebook.log"
    with log.open("w") as out:
        # a session of its own: stop() ends the rulebook and the playbook runs it started, as one process group
        proc = subprocess.Popen(  # noqa: S603
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir, start_new_session=True
        )
    rb = Rulebook(proc, f"http://127.0.0.1:{port}", workdir / "records", log)
    deadline = time.monotonic() + timeout
    while not _healthz(rb.url):
        if proc.poll() is not None:
            raise LabError(f"ansible-rulebook exited {proc.returncode}: {log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            rb.stop()
            raise LabError(
                f"the rulebook's source did not answer on {rb.url} within {timeout:.0f}s: {log.read_text()[-4000:]}"
            )
        time.sleep(0.5)
    return rb


# ---- the lab process `eda` (python -m gpuops_lab eda up|down|status) ----------------------------------------------
def _proc(cfg: LabConfig) -> Proc:
    return Proc(PROC, cfg.run, cfg.logs)


def state_file(cfg: LabConfig) -> Path:
    return cfg.state / "eda" / "state.json"


def up(
    cfg: LabConfig,
    mode: str = "dry_run",
    controller_vars: dict[str, Any] | None = None,
    timeout: float = 180,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Start the rulebook with the collection's remediation playbook in this mode as the lab process ``eda``, its
    source on the port the lab's Alertmanager sends the GPU alerts to; a running one in another mode (or with other
    variables) is restarted. Returns the state written to the lab's state directory."""
    from . import monitoring

    if not cfg.kubeconfig.is_file():
        raise LabError(f"no kubeconfig at {cfg.kubeconfig}: start the lab first (python -m gpuops_lab up)")
    port = monitoring.port(cfg, "eda-webhook")
    want = {"mode": mode, "port": port, "playbook": REAL, "controller_vars": controller_vars or {}}
    proc = _proc(cfg)
    if proc.alive():
        if read_state(cfg).get("mode") == mode and read_state(cfg).get("controller_vars") == want["controller_vars"]:
            say(f"eda: already running (pid {proc.pid()}, mode {mode})")
            return read_state(cfg)
        proc.stop(timeout=20)
        deadline = time.monotonic() + 10  # the stopped rulebook's socket closes as the process exits
        while not port_free(port) and time.monotonic() < deadline:
            time.sleep(0.2)
    if not port_free(port):
        raise LabError(
            f"port {port} (eda-webhook) on 127.0.0.1 is already in use; choose another with "
            "GPUOPS_LAB_EDA_WEBHOOK_PORT (hack/gpuops_lab/monitoring.py PORTS)"
        )
    workdir = cfg.state / "eda"
    argv, env = prepare(workdir, port, mode, REAL, inventory(cfg, controller_vars))
    proc.start(argv, env=env, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    wait_until(proc, lambda: _healthz(url), timeout, f"GET {url}/healthz")
    state = {**want, "pid": proc.pid(), "url": url, "log": str(proc.log)}
    state_file(cfg).write_text(json.dumps(state, indent=1, sort_keys=True))
    say(f"eda: ready (pid {proc.pid()}, mode {mode}, {REAL}, webhook {url}, log {proc.log})")
    return state


def parse_vars(words: list[str]) -> dict[str, Any]:
    """KEY=VALUE words (VALUE read as YAML) as a mapping; a word without '=' or with an empty key is refused."""
    import yaml

    out: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key.strip():
            raise LabError(f"{word!r} is not KEY=VALUE (e.g. gpuops_remediation_namespace=gpuops-remediation)")
        out[key.strip()] = yaml.safe_load(value) if value else ""
    return out


def read_state(cfg: LabConfig) -> dict[str, Any]:
    try:
        return json.loads(state_file(cfg).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def down(cfg: LabConfig) -> bool:
    """Stop the lab's rulebook; True when one ran."""
    stopped = _proc(cfg).stop(timeout=20)
    state_file(cfg).unlink(missing_ok=True)
    return stopped


def status(cfg: LabConfig) -> dict[str, Any]:
    """{running, pid, and the state up() wrote (mode, port, playbook, url, log)}."""
    pid = _proc(cfg).pid()
    return {**(read_state(cfg) if pid else {}), "running": pid is not None, "pid": pid}

"""A killed run converges (issue 27 §2): a run of our release path is killed at each step of a release - with
SIGKILL (kill -9 of the ansible-playbook process) and with SIGINT (Ctrl-C) - and the next run, with no manual step,
converges: release deployed with the asked values, the Lease given back, no chart copy left. How long each rerun
took is written to GPUOPS_KILL_TIMINGS (a figure for benchmarks/, not a check here: it is the Lease's 15 s plus a
playbook run, which a loaded machine stretches; a rerun is stopped after 240 s). Two more cases kill every process
of the run at once while helm runs (as a killed container or CI job does), leaving the release pending-upgrade, and
pending-install on a first install: the rerun rolls back (or uninstalls) and applies, saying so.

One namespace, one node of its pool and one installed release serve every case; the Lease lasts 15 s here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_helm import CERT_MANAGER, KWOK, POOL, helm, namespace_exists, new_ns, release_meta

HERE = Path(__file__).parent
PLAYBOOK = HERE / "playbooks" / "helm_lifecycle.yml"
LEASE = 15
RELEASE = "cert-manager"
TIMINGS = Path(os.environ.get("GPUOPS_KILL_TIMINGS", "/dev/null"))


def env(tmpdir: Path) -> dict[str, str]:
    """Ansible's own strategy (as a user runs it), without the tests' Mitogen."""
    e = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_STRATEGY", "ANSIBLE_STRATEGY_PLUGINS")}
    return {**e, "ANSIBLE_NOCOLOR": "1", "TMPDIR": str(tmpdir)}


def argv(cluster, **extra) -> list[str]:
    extra = {
        "ansible_python_interpreter": sys.executable,
        "kubeconfig": cluster.kubeconfig,
        "repo_url": cluster.chart_repo_url,
        "lock_duration": LEASE,
        "lock_wait": 120,
        **CERT_MANAGER,
        **extra,
    }
    return ["ansible-playbook", str(PLAYBOOK), "-i", "localhost,", "-e", json.dumps(extra)]


def values(ns: str, tag: str, pool: str | None = None) -> dict:
    return {"tolerations": KWOK, "nodeSelector": {POOL: pool or ns}, "image": {"tag": tag}}


def landed(ns: str, release: str) -> dict:
    obj = {"api_version": "apps/v1", "kind": "Deployment", "name": release, "namespace": ns}
    return {"object": obj, "want": {"replicas": 1}, "paths": [["replicas"]]}


def lease(cluster, ns: str, release: str):
    from kubernetes import client

    try:
        return client.CoordinationV1Api(cluster.api_client).read_namespaced_lease(
            f"gpuops-helm-{ns}.{release}", "kube-system"
        )
    except client.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def stored(cluster, ns: str, release: str) -> dict:
    """The release's newest revision as Helm's storage Secrets label it ({"status", "revision"}; {} when none): one
    API call, where `helm get metadata` would start a process on every poll of the waits below."""
    from kubernetes import client

    secrets = client.CoreV1Api(cluster.api_client).list_namespaced_secret(
        ns, label_selector=f"owner=helm,name={release}"
    )
    revisions = [(int(s.metadata.labels["version"]), s.metadata.labels["status"]) for s in secrets.items]
    if not revisions:
        return {}
    revision, status = max(revisions)
    return {"status": status, "revision": revision}


def copies(tmpdir: Path) -> list[Path]:
    return sorted(tmpdir.glob("gpuops-chart-*"))


def descendants(pid: int) -> list[int]:
    """Every process below pid (children first in the list's tail), from /proc."""
    parents: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# Each step: how the test sees that the killed run has reached it.
def _lock_taken(c, ns, rel, tmp, out, before):
    held = lease(c, ns, rel)
    return held is not None and (held.spec.holder_identity or "").startswith("gpuops.platform ")


def _chart_pulled(c, ns, rel, tmp, out, before):
    return any((d / "cert-manager" / "Chart.yaml").is_file() for d in copies(tmp))


def _helm_running(c, ns, rel, tmp, out, before):
    return str(stored(c, ns, rel).get("status", "")).startswith("pending-")


def _after_helm(c, ns, rel, tmp, out, before):
    now = stored(c, ns, rel)
    return now.get("status") == "deployed" and now.get("revision", 0) > before


def _landing_check(c, ns, rel, tmp, out, before):
    # the read of the live object the landing check compares (the caller's, as the operator roles' wait reads it)
    return "TASK [Read the live object (the operator roles' validation wait reads it)]" in out.read_text()


STEPS = {
    "lock-taken": _lock_taken,
    "chart-pulled": _chart_pulled,
    "helm-running": _helm_running,
    "after-helm": _after_helm,
    "landing-check": _landing_check,
}


@pytest.fixture(scope="module")
def installed(cluster, tmp_path_factory):
    """One namespace with a node of its pool and the release deployed (revision 1), for every case."""
    from gpuops_lab import nodes
    from kubernetes import client

    core = client.CoreV1Api(cluster.api_client)
    ns = new_ns()
    made = nodes.add(core, "cpu-only", 1, prefix=f"k{ns[2:8]}-cpu-only")
    core.patch_node(made[0], {"metadata": {"labels": {POOL: ns}}})
    tmp = tmp_path_factory.mktemp("installed")
    try:
        r = subprocess.run(  # noqa: S603
            argv(cluster, release=RELEASE, ns=ns, values=values(ns, "v0")),
            env=env(tmp),
            capture_output=True,
            text=True,
            check=False,
        )
        assert r.returncode == 0, r.stdout[-4000:]
        yield ns
    finally:
        for rel in (RELEASE, "cm-install"):
            subprocess.run(  # noqa: S603
                argv(cluster, release=rel, ns=ns, state="absent", purge=False),
                env=env(tmp),
                capture_output=True,
                check=False,
            )
        if namespace_exists(core, ns):
            core.delete_namespace(ns)
        nodes.remove(core, made)


def kill_at(cluster, tmp: Path, step: str, how: str, release: str, ns: str, vals: dict, **extra) -> dict:
    """Start a run, wait until it reaches ``step``, kill it ``how``; returns what was seen."""
    before = stored(cluster, ns, release).get("revision", 0)
    out = tmp / f"killed-{step}-{how}.log"
    with out.open("w") as f:
        proc = subprocess.Popen(  # noqa: S603
            argv(cluster, release=release, ns=ns, values=vals, **extra), env=env(tmp), stdout=f, stderr=f
        )
    deadline = time.monotonic() + 150
    while not STEPS[step](cluster, ns, release, tmp, out, before):
        assert proc.poll() is None, f"the run ended before {step}: {out.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the run never reached {step}: {out.read_text()[-3000:]}"
        time.sleep(0.25)
    below = descendants(proc.pid)
    if how == "SIGKILL-all":  # every process of the run, deepest first (a killed container, a cancelled CI job)
        for pid in [*reversed(below), proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    else:
        proc.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGINT)
    proc.wait(timeout=30)
    return {"below": below, "status": (release_meta(cluster, ns, release) or {}).get("status"), "log": out}


CASES = [(step, how) for step in STEPS for how in ("SIGKILL", "SIGINT")] + [("helm-running", "SIGKILL-all")]


@pytest.mark.parametrize(("step", "how"), CASES, ids=[f"{s}-{h}" for s, h in CASES])
def test_a_killed_run_converges_on_the_next_run(cluster, installed, tmp_path, step, how):
    ns, tag = installed, f"{step}-{how}".lower()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # helm-running: the killed run's pods cannot become ready (no node of that pool), so helm waits until killed
    bad = values(ns, tag, pool="nowhere") if step == "helm-running" else values(ns, tag)
    extra = {"landed": landed(ns, RELEASE)} if step == "landing-check" else {}
    seen = kill_at(cluster, tmp, step, how, RELEASE, ns, bad, wait_timeout=120, **extra)

    if how == "SIGKILL" and step == "helm-running":
        # kill -9 of ansible-playbook leaves its worker, the module and helm running: the module sees the run is
        # gone, stops helm (the release is marked failed, not left pending) and gives the Lease back
        deadline = time.monotonic() + 20
        while any(alive(p) for p in seen["below"]) or lease(cluster, ns, RELEASE) is not None:
            assert time.monotonic() < deadline, "the orphaned helm or its Lease outlived the killed run"
            time.sleep(0.5)
        assert release_meta(cluster, ns, RELEASE)["status"] == "failed"
    if how == "SIGKILL-all":
        assert seen["status"] == "pending-upgrade", seen

    started = time.monotonic()
    r = subprocess.run(  # noqa: S603
        argv(cluster, release=RELEASE, ns=ns, values=values(ns, tag), **extra),
        env=env(tmp),
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    took = time.monotonic() - started
    with TIMINGS.open("a") as f:
        f.write(json.dumps({"step": step, "signal": how, "rerun_s": round(took, 1), "status": seen["status"]}) + "\n")
    assert r.returncode == 0, r.stdout[-6000:]
    assert "another operation" not in r.stdout
    meta = release_meta(cluster, ns, RELEASE)
    assert meta["status"] == "deployed", meta
    got = json.loads(helm(cluster, "get", "values", RELEASE, "-n", ns, "-o", "json").stdout)
    assert got["image"]["tag"] == tag and got["nodeSelector"] == {POOL: ns}
    assert lease(cluster, ns, RELEASE) is None, "the rerun did not give the Lease back"
    assert copies(tmp) == [], "a chart copy of the killed run is left"
    if how == "SIGKILL-all":
        said = r.stdout + r.stderr  # warnings go to stderr
        assert "was pending-upgrade at revision" in said and "rolled back to revision" in said, said[-6000:]


def test_a_first_install_killed_is_uninstalled_and_installed_again(cluster, installed, tmp_path):
    ns, release = installed, "cm-install"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    seen = kill_at(
        cluster, tmp, "helm-running", "SIGKILL-all", release, ns, values(ns, "i1", pool="nowhere"), wait_timeout=120
    )
    assert seen["status"] == "pending-install", seen
    started = time.monotonic()
    r = subprocess.run(  # noqa: S603
        argv(cluster, release=release, ns=ns, values=values(ns, "i1")),
        env=env(tmp),
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    took = time.monotonic() - started
    with TIMINGS.open("a") as f:
        f.write(json.dumps({"step": "first-install", "signal": "SIGKILL-all", "rerun_s": round(took, 1)}) + "\n")
    assert r.returncode == 0, r.stdout[-6000:]
    said = r.stdout + r.stderr  # warnings go to stderr
    assert "was pending-install at revision 1" in said and "uninstalled it" in said, said[-6000:]
    assert release_meta(cluster, ns, release)["status"] == "deployed"
    assert lease(cluster, ns, release) is None and copies(tmp) == []

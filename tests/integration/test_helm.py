"""Our release path (the internal helm_release role and its helm_release_apply / helm_release_lock modules)
against the lab (the lifecycle itself - subcharts' CRDs applied, upgraded and removed, --check --diff - is proven
where the roles drive it, see below): the run's Lease, names and values checked
before any change, a stalled repository timing out, and no temporary chart copy left behind by a failure.
Every result is read back independently (helm CLI, Kubernetes API)."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parent
PLAYBOOK = HERE / "playbooks" / "helm_lifecycle.yml"
KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
POOL = "gpuops.test/pool"
CERT_MANAGER = {"chart": "cert-manager", "version": "v1.19.1"}


@pytest.fixture
def tmpdir_env(tmp_path):
    """TMPDIR for the playbook run, to see whether the role leaves a chart copy behind."""
    d = tmp_path / "tmp"
    d.mkdir()
    return d


def play(cluster, tmpdir, *flags, timeout=300, **extra) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "TMPDIR": str(tmpdir)}
    extra = {
        "ansible_python_interpreter": sys.executable,
        "kubeconfig": cluster.kubeconfig,
        "repo_url": cluster.chart_repo_url,
        **extra,
    }
    argv = ["ansible-playbook", str(PLAYBOOK), "-i", "localhost,", "-e", json.dumps(extra), *flags]
    return subprocess.run(  # noqa: S603
        argv, capture_output=True, text=True, env=env, cwd=HERE.parents[1], check=False, timeout=timeout
    )


def out(r: subprocess.CompletedProcess[str]) -> str:
    return r.stdout[-8000:] + r.stderr[-3000:]


def helm(cluster, *args) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [str(cluster.cfg.binary("helm")), *args, "--kubeconfig", cluster.kubeconfig],
        capture_output=True,
        text=True,
        check=False,
    )


def release_meta(cluster, ns: str, name: str) -> dict | None:
    r = helm(cluster, "get", "metadata", name, "-n", ns, "-o", "json")
    return json.loads(r.stdout) if r.returncode == 0 else None


def namespace_exists(core, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespace(name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def copies(tmpdir: Path) -> list[Path]:
    """Temporary chart copies the role left (kubernetes.core's discovery cache files are not ours)."""
    return sorted(tmpdir.glob("gpuops-chart-*"))


def pool_node(core, add_nodes, pool: str) -> None:
    """Add a node for the test's own pool: pods with nodeSelector {POOL: pool} can run only once it exists,
    whatever other nodes the lab has (inventory nodes)."""
    # labelled=False here and below: these charts' pods need a node, not NFD's labels (waiting for them costs up to
    # nfd-master's reflector back-off after an earlier test's uninstall deleted the NFD CRDs)
    (name,) = add_nodes("cpu-only", 1, labelled=False)
    core.patch_node(name, {"metadata": {"labels": {POOL: pool}}})


def new_ns() -> str:
    return f"h-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------------ lifecycle


# The release lifecycle through this path is proven where a role drives it, not again here (issue 7: one install per
# fact): molecule/amd_gpu_operator installs the AMD chart with its KMM subchart over a stale KMM CRD (verify: the CRD
# upgraded from the chart; cleanup: the release, its CRDs and its subcharts' CRDs gone); test_gpu_operator_role's
# lifecycle shows a values change under --check --diff (the manifest diff, the values that differ, nothing changed)
# and the upgrade with a CRD change.


# ------------------------------------------------------------------------------------------------ before any change


@pytest.mark.parametrize(
    ("release", "ns", "expected"),
    [
        ("Bad_Release", None, "is not a valid Helm release name"),
        ("r" * 54, None, "is longer than 53 characters"),
        ("cert-manager", "Bad.Namespace", "is not a DNS-1123 label"),
    ],
    ids=["release-syntax", "release-length", "namespace"],
)
def test_bad_names_fail_before_any_change(cluster, core, tmpdir_env, release, ns, expected):
    ns = ns or new_ns()
    r = play(cluster, tmpdir_env, release=release, ns=ns, **CERT_MANAGER)
    assert r.returncode != 0
    assert expected in r.stdout and "Nothing was changed" in r.stdout, out(r)
    assert not namespace_exists(core, ns.lower()), "the namespace was created before the name was checked"
    assert copies(tmpdir_env) == []


def test_values_of_the_wrong_type_fail_against_the_chart_schema(cluster, core, tmpdir_env):
    ns = new_ns()
    values = {"replicaCount": "two", "crds": {"enabled": "yes", "enabeld": True}}
    r = play(cluster, tmpdir_env, release="cert-manager", ns=ns, values=values, **CERT_MANAGER)
    assert r.returncode != 0
    for expected in (
        'replicaCount: "two" is string, the chart expects number',
        'crds.enabled: "yes" is string, the chart expects boolean',
        "crds.enabeld: the chart does not accept this key",
        "Nothing was changed",
    ):
        assert expected in r.stdout, out(r)
    assert not namespace_exists(core, ns), "the namespace was created before the values were checked"
    assert copies(tmpdir_env) == [], "temporary chart copy left behind by a failure"


# ------------------------------------------------------------------------------------------------ the run's lock


def test_a_second_run_is_told_who_holds_the_release(cluster, core, add_nodes, tmpdir_env):
    from kubernetes import client

    add_nodes("cpu-only", 1, labelled=False)
    ns, release = new_ns(), "cert-manager"
    leases = client.CoordinationV1Api(cluster.api_client)
    name = f"gpuops-helm-{ns}.{release}"
    now = datetime.now(UTC)
    body = {
        "metadata": {"name": name},
        "spec": {
            "holderIdentity": "alice@bastion run 1234",
            "leaseDurationSeconds": 600,
            "acquireTime": now.isoformat().replace("+00:00", "Z"),
            "renewTime": now.isoformat().replace("+00:00", "Z"),
        },
    }
    leases.create_namespaced_lease("kube-system", body)
    try:
        r = play(cluster, tmpdir_env, release=release, ns=ns, lock_wait=2, values={"tolerations": KWOK}, **CERT_MANAGER)
        assert r.returncode != 0
        assert "is being changed by another run" in r.stdout and "alice@bastion run 1234" in r.stdout, out(r)
        assert "another operation is in progress" not in r.stdout
        assert not namespace_exists(core, ns), "the run changed the cluster without the lock"
        assert leases.read_namespaced_lease(name, "kube-system").spec.holder_identity == "alice@bastion run 1234"

        # The holder died: once its Lease has expired the next run takes it over, converges and gives it back.
        old = (now - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
        lease = leases.read_namespaced_lease(name, "kube-system")
        lease.spec.renew_time = old
        lease.spec.acquire_time = old
        leases.replace_namespaced_lease(name, "kube-system", lease)
        r = play(cluster, tmpdir_env, release=release, ns=ns, values={"tolerations": KWOK}, **CERT_MANAGER)
        assert r.returncode == 0, out(r)
        assert release_meta(cluster, ns, release)["status"] == "deployed"
        assert [
            x.metadata.name for x in leases.list_namespaced_lease("kube-system").items if x.metadata.name == name
        ] == []
    finally:
        play(cluster, tmpdir_env, release=release, ns=ns, state="absent", purge=False, **CERT_MANAGER)
        if namespace_exists(core, ns):
            core.delete_namespace(ns)
        try:
            leases.delete_namespaced_lease(name, "kube-system")
        except client.exceptions.ApiException:
            pass


def test_concurrent_runs_wait_for_each_other(cluster, core, add_nodes, tmpdir_env, tmp_path):
    """A second run starts while the first one's install is still waiting for its pods: it waits for the first
    run's Lease instead of failing with Helm's "another operation is in progress" (or installing over a pending
    release), then finds the release unchanged. Both succeed, with one revision."""
    ns, release = new_ns(), "cert-manager"
    other_tmp = tmp_path / "tmp2"
    other_tmp.mkdir()
    values = {"tolerations": KWOK, "nodeSelector": {POOL: ns}}
    kw = {"release": release, "ns": ns, "lock_wait": 240, "values": values, **CERT_MANAGER}
    results: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        first = threading.Thread(target=lambda: results.update(first=play(cluster, tmpdir_env, **kw)))
        first.start()  # no node of its pool yet: its helm --wait holds the release in pending-install
        deadline = time.monotonic() + 120
        while (release_meta(cluster, ns, release) or {}).get("status") != "pending-install":
            assert time.monotonic() < deadline and first.is_alive(), "the first run never reached helm install"
            time.sleep(0.5)
        second = threading.Thread(target=lambda: results.update(second=play(cluster, other_tmp, **kw)))
        second.start()
        time.sleep(20)  # the second run found the release pending and is waiting for the Lease (asserted below)
        pool_node(core, add_nodes, ns)
        first.join()
        second.join()
        assert results["first"].returncode == 0, out(results["first"])
        assert results["second"].returncode == 0, out(results["second"])
        assert "another operation" not in results["second"].stdout
        # the second run took the release path (the release was pending when it looked), so it waited for the Lease
        assert re.search(
            r"TASK \[gpuops\.platform\.helm_release : Take the release's Lease[^\n]*\n(?:[^\n]*\n)?ok: ",
            results["second"].stdout,
        ), out(results["second"])
        meta = release_meta(cluster, ns, release)
        assert meta["status"] == "deployed" and meta["revision"] == 1, meta
    finally:
        play(cluster, tmpdir_env, release=release, ns=ns, state="absent", purge=False, **CERT_MANAGER)
        if namespace_exists(core, ns):
            core.delete_namespace(ns)


# ------------------------------------------------------------------------------------------------ failures


class _Stalling(http.server.BaseHTTPRequestHandler):
    index = b""

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/index.yaml":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(self.index)
            return
        time.sleep(30)  # the chart download never answers

    def log_message(self, *args):
        pass


def test_a_stalled_repository_times_out_naming_the_url(cluster, core, tmpdir_env):
    with urllib.request.urlopen(f"{cluster.chart_repo_url}/index.yaml", timeout=5) as resp:  # noqa: S310
        index = yaml.safe_load(resp.read())
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stalling)
    server.daemon_threads = True
    port = server.server_address[1]
    entries = index["entries"]["cert-manager"]
    for e in entries:
        e["urls"] = [f"http://127.0.0.1:{port}/charts/cert-manager-{e['version']}.tgz"]
    _Stalling.index = yaml.safe_dump({"apiVersion": "v1", "entries": {"cert-manager": entries}}).encode()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ns = new_ns()
    try:
        started = time.monotonic()
        r = play(
            cluster,
            tmpdir_env,
            release="cert-manager",
            ns=ns,
            repo_url=f"http://127.0.0.1:{port}",
            repo_timeout=3,
            timeout=120,
            **CERT_MANAGER,
        )
        took = time.monotonic() - started
    finally:
        server.shutdown()
    assert r.returncode != 0
    assert f"http://127.0.0.1:{port}/charts/cert-manager-v1.19.1.tgz" in r.stdout and "timeout 3s" in r.stdout, out(r)
    assert took < 60, f"the stalled download took {took:.0f}s"
    assert not namespace_exists(core, ns)
    assert copies(tmpdir_env) == [], "temporary chart copy left behind by a failure"


def test_a_failure_mid_way_reports_changed_leaves_no_copy_and_the_rerun_converges(cluster, core, add_nodes, tmpdir_env):
    ns, release = new_ns(), "cert-manager"
    kw = {"release": release, "ns": ns, "values": {"tolerations": KWOK, "nodeSelector": {POOL: ns}}, **CERT_MANAGER}
    try:
        # No node of its pool: the Deployment never gets ready; helm --wait fails after the release was changed.
        r = play(cluster, tmpdir_env, wait_timeout=5, **kw)
        assert r.returncode != 0
        assert "changed before the failure" in r.stdout and "helm upgrade --install" in r.stdout, out(r)
        assert release_meta(cluster, ns, release)["status"] == "failed"
        assert copies(tmpdir_env) == [], "temporary chart copy left behind by a failure"

        pool_node(core, add_nodes, ns)  # same values: the rerun upgrades because the last revision failed
        r = play(cluster, tmpdir_env, **kw)
        assert r.returncode == 0, out(r)
        meta = release_meta(cluster, ns, release)
        assert meta["status"] == "deployed" and meta["revision"] == 2, meta
        assert copies(tmpdir_env) == []
    finally:
        play(cluster, tmpdir_env, release=release, ns=ns, state="absent", purge=False, **CERT_MANAGER)
        if namespace_exists(core, ns):
            core.delete_namespace(ns)

"""The release path from an oci:// repository: the lab's real OCI registry (CNCF Distribution, TLS with the lab
CA, hack/gpuops_lab/registry.py) serves the same fixture charts as its HTTP chart repository. A pinned version the
registry lacks fails naming the reference and the versions it has, and changes nothing; the pinned one installs
through the same role (helm pull, then the shared schema check, CRDs and release). Read back with the helm CLI and
the Kubernetes API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).parent
PLAYBOOK = HERE / "playbooks" / "helm_lifecycle.yml"
KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def play(cluster, tmpdir, **extra) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "TMPDIR": str(tmpdir)}
    extra = {
        "ansible_python_interpreter": sys.executable,
        "kubeconfig": cluster.kubeconfig,
        "repo_url": cluster.cfg.chart_registry_url,
        "gpuops_chart_repo_ca_file": str(cluster.cfg.pki / "ca.crt"),
        "release": "cert-manager",
        "chart": "cert-manager",
        **extra,
    }
    argv = ["ansible-playbook", str(PLAYBOOK), "-i", "localhost,", "-e", json.dumps(extra)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=HERE.parents[1], check=False, timeout=300)  # noqa: S603


def test_a_chart_from_the_oci_registry_installs_and_an_unknown_version_changes_nothing(
    cluster, core, add_nodes, tmp_path
):
    from kubernetes.client.exceptions import ApiException

    ns = f"o-{uuid.uuid4().hex[:8]}"
    ref = f"{cluster.cfg.chart_registry_url}/cert-manager"

    r = play(cluster, tmp_path, ns=ns, version="v9.9.9")
    assert r.returncode != 0
    assert (
        f"test_helm: cannot pull chart {ref} version v9.9.9: the registry has no such chart version (it has: v1.19.1)"
        in r.stdout
    ), r.stdout[-4000:]
    assert "Nothing was changed." in r.stdout
    try:
        core.read_namespace(ns)
        raise AssertionError(f"namespace {ns} was created by a failed pull")
    except ApiException as exc:
        assert exc.status == 404
    assert sorted(tmp_path.glob("gpuops-chart-*")) == [], "temporary chart copy left behind by a failure"

    add_nodes("cpu-only", 1, labelled=False)
    try:
        r = play(cluster, tmp_path, ns=ns, version="v1.19.1", values={"tolerations": KWOK})
        assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
        meta = subprocess.run(  # noqa: S603
            [
                str(cluster.cfg.binary("helm")),
                "get",
                "metadata",
                "cert-manager",
                "-n",
                ns,
                "-o",
                "json",
                "--kubeconfig",
                cluster.kubeconfig,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        got = json.loads(meta.stdout)
        assert (got["chart"], got["version"], got["status"]) == ("cert-manager", "v1.19.1", "deployed"), got
        assert sorted(tmp_path.glob("gpuops-chart-*")) == [], "temporary chart copy left behind"
    finally:
        r = play(cluster, tmp_path, ns=ns, version="v1.19.1", state="absent")
        assert r.returncode == 0, r.stdout[-4000:]

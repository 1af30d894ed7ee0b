"""kubernetes.core.helm installs, upgrades and uninstalls a fixture chart from the local repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def run_playbook(playbook: Path, extra: dict, cluster) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1"}
    extra = {"ansible_python_interpreter": sys.executable, **extra}
    argv = ["ansible-playbook", str(playbook), "-i", "localhost,", "-e", json.dumps(extra)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=HERE.parents[1], check=False)


def test_local_repository_index_lists_the_fixture_charts(cluster):
    import urllib.request

    with urllib.request.urlopen(f"{cluster.chart_repo_url}/index.yaml", timeout=5) as r:  # noqa: S310
        index = r.read().decode()
    assert "node-feature-discovery" in index and "0.19.0" in index


def test_helm_install_upgrade_uninstall(cluster, namespace, add_nodes):
    add_nodes("cpu-only", 1)  # somewhere for the chart's pods to run (the lab may have no nodes yet)
    r = run_playbook(
        HERE / "playbooks" / "helm_lifecycle.yml",
        {"kubeconfig": cluster.kubeconfig, "ns": namespace, "repo_url": cluster.chart_repo_url},
        cluster,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "failed=0" in r.stdout

"""The collection as users get it: the built artifact, runtime metadata, declared dependencies."""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _galaxy() -> dict:
    return yaml.safe_load((REPO / "galaxy.yml").read_text())


def test_build_has_no_tests_caches_or_state(tmp_path):
    r = subprocess.run(
        ["ansible-galaxy", "collection", "build", str(REPO), "--output-path", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    (artifact,) = tmp_path.glob("gpuops-platform-*.tar.gz")
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
    assert "MANIFEST.json" in names and "site.yml" in names and "playbooks/site.yml" in names
    bad = [n for n in names if re.match(r"^(tests|molecule|benchmarks|hack|\.venv|\.state|\.cache|\.git)(/|$)", n)]
    assert bad == []
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_installed_collection_runs_site_playbook_by_fqcn(tmp_path):
    """`ansible-playbook gpuops.platform.site` resolves once the artifact is installed."""
    subprocess.run(
        ["ansible-galaxy", "collection", "build", str(REPO), "--output-path", str(tmp_path)],
        capture_output=True,
        check=True,
    )
    (artifact,) = tmp_path.glob("gpuops-platform-*.tar.gz")
    coll = tmp_path / "collections"
    subprocess.run(
        ["ansible-galaxy", "collection", "install", "--force", "--no-deps", "-p", str(coll), str(artifact)],
        capture_output=True,
        check=True,
    )
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(coll)
    r = subprocess.run(
        ["ansible-playbook", "gpuops.platform.site", "-i", str(REPO / "inventories/local"), "--syntax-check"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_module_is_in_the_action_group():
    runtime = yaml.safe_load((REPO / "meta/runtime.yml").read_text())
    modules = sorted(p.stem for p in (REPO / "plugins/modules").glob("*.py") if p.stem != "__init__")
    assert sorted(runtime["action_groups"]["platform"]) == modules
    assert runtime["requires_ansible"].startswith(">=2.")


def test_dependencies_are_exactly_the_collections_used():
    used = set()
    for path in [*REPO.glob("playbooks/**/*.yml"), *REPO.glob("roles/**/*.yml"), REPO / "site.yml"]:
        # task keys: "  - ns.coll.module:" or "    ns.coll.module:" at the start of a line
        used |= set(re.findall(r"^\s*(?:- )?([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+:", path.read_text(), re.M))
    used -= {"ansible.builtin", "gpuops.platform"}
    assert used == set(_galaxy()["dependencies"]), f"used: {sorted(used)}"


def test_example_inventory_has_nothing_of_the_lab():
    """inventories/example is what a real site copies: no simulated hardware profile, no lab state path."""
    text = "\n".join(p.read_text() for p in sorted((REPO / "inventories/example").rglob("*.yml")))
    assert "gpuops_hardware_profile" not in text and "_gpuops_lab_state" not in text and "GPUOPS_LAB" not in text

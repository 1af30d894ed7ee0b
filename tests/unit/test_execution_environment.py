"""The AWX execution environment: `hack/ee-context.sh` writes a complete ansible-builder v3 build context offline
(issue 12) - the collection artifact, its Python and system requirements, kubernetes.core and the pinned helm."""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[name.strip().lower()] = version.strip()
    return out


def _env_value(name: str) -> str:
    for line in (REPO / "hack/cluster/versions.env").read_text().splitlines():
        if line.startswith(name + "="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"{name} not in versions.env")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    out = tmp_path_factory.mktemp("ee") / "context"
    r = subprocess.run(
        ["bash", str(REPO / "hack/ee-context.sh"), str(out)], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def test_containerfile_installs_pinned_ansible_and_helm(context):
    text = (context / "Containerfile").read_text()
    core = _pins(REPO / "requirements/dev.txt")["ansible-core"]
    assert f"ansible-core=={core}" in text and "ansible-runner==" in text
    assert 'ARG EE_BASE_IMAGE="quay.io/centos/centos:stream9"' in text
    assert "COPY _build/files/helm /usr/local/bin/helm" in text
    helm = context / "_build/files/helm"
    r = subprocess.run([str(helm), "version", "--short"], capture_output=True, text=True, check=True)
    assert r.stdout.startswith("v" + _env_value("HELM_VERSION"))


def test_galaxy_requirements_name_the_collection_and_kubernetes_core(context):
    req = yaml.safe_load((context / "_build/requirements.yml").read_text())
    got = {c["name"]: c for c in req["collections"]}
    assert got["files/gpuops-platform.tar.gz"]["type"] == "file"
    # kubernetes.core: the version the tests run with, inside galaxy.yml's dependency range
    manifest = REPO / ".venv/lib/python3.12/site-packages/ansible_collections/kubernetes/core/MANIFEST.json"
    tested = yaml.safe_load(manifest.read_text())["collection_info"]["version"]
    assert got["kubernetes.core"]["version"] == tested
    rng = yaml.safe_load((REPO / "galaxy.yml").read_text())["dependencies"]["kubernetes.core"]
    low, high = (part.strip().lstrip(">=<") for part in rng.split(","))
    assert _version(low) <= _version(tested) < _version(high)


def test_the_artifact_carries_its_ee_dependencies(context):
    with tarfile.open(context / "_build/files/gpuops-platform.tar.gz") as tar:
        names = set(tar.getnames())
        manifest = yaml.safe_load(tar.extractfile("MANIFEST.json").read())  # type: ignore[union-attr]
        meta = yaml.safe_load(tar.extractfile("meta/execution-environment.yml").read())  # type: ignore[union-attr]
    info = manifest["collection_info"]
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert (info["namespace"], info["name"], info["version"]) == ("gpuops", "platform", galaxy["version"])
    assert meta["dependencies"] == {"python": "requirements.txt", "system": "bindep.txt"}
    assert {"requirements.txt", "bindep.txt"} <= names and "execution-environment.yml" not in names
    modules = {f"plugins/modules/{p.name}" for p in (REPO / "plugins/modules").glob("*.py")}
    assert modules and modules <= names


def test_python_requirements_are_pinned_as_tested_and_cover_every_import(context):
    assert (context / "_build/requirements.txt").read_text() == (REPO / "requirements.txt").read_text()
    assert (context / "_build/bindep.txt").read_text() == (REPO / "bindep.txt").read_text()
    pins = _pins(REPO / "requirements.txt")
    tested = _pins(REPO / "requirements/constraints.txt")
    assert pins and all(tested.get(name) == version for name, version in pins.items()), (pins, tested)
    # every third-party module the plugins import is provided by a pinned requirement
    provides = {"kubernetes": "kubernetes", "yaml": "pyyaml"}
    imported = set()
    for path in (REPO / "plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {
        m for m in imported if m not in sys.stdlib_module_names and m not in ("ansible", "ansible_collections")
    }
    assert third_party <= set(provides), third_party - set(provides)
    assert {provides[m] for m in third_party} <= set(pins)

"""The AWX execution environment: `hack/ee-context.sh` writes a complete ansible-builder v3 build context offline
(issue 12) - the collection artifact, its Python and system requirements, kubernetes.core and the pinned helm. The
EDA decision environment (decision-environment.yml) the same way: ansible-rulebook, Java 17 and the collection's
event source and rulebooks, pinned as tested."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

_TRACEBACK_LIMIT = getattr(sys, "tracebacklimit", None)
from ansible_builder.ee_schema import validate_schema  # noqa: E402

# ansible_builder.exceptions sets sys.tracebacklimit = 0 when it is imported (in its DefinitionError class body): every
# later traceback of this pytest process would lose its frames (a lab unit test asserts one has them). Undo it.
if _TRACEBACK_LIMIT is None:
    vars(sys).pop("tracebacklimit", None)
else:
    sys.tracebacklimit = _TRACEBACK_LIMIT

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


def _build_context(out: Path, definition: str) -> Path:
    r = subprocess.run(
        ["bash", str(REPO / "hack/ee-context.sh"), str(out), definition], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    return _build_context(tmp_path_factory.mktemp("ee") / "context", "execution-environment.yml")


@pytest.fixture(scope="module")
def de_context(tmp_path_factory):
    return _build_context(tmp_path_factory.mktemp("de") / "context", "decision-environment.yml")


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


def test_the_decision_environment_is_a_builder_v3_definition_pinned_as_tested():
    de = yaml.safe_load((REPO / "decision-environment.yml").read_text())
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    validate_schema(yaml.safe_load((REPO / "decision-environment.yml").read_text()))  # raises DefinitionError
    assert de["version"] == 3
    dev, tested = _pins(REPO / "requirements/dev.txt"), _pins(REPO / "requirements/constraints.txt")
    deps = de["dependencies"]
    assert deps["ansible_core"]["package_pip"] == f"ansible-core=={dev['ansible-core']}"
    assert deps["ansible_runner"]["package_pip"] == f"ansible-runner=={dev['ansible-runner']}"
    pins = dict(p.split("==") for p in deps["python"])
    assert (pins["ansible-rulebook"], pins["aiohttp"]) == (dev["ansible-rulebook"], dev["aiohttp"])
    normal = {re.sub(r"[-_.]+", "-", name): version for name, version in tested.items()}  # PEP 503 names
    assert all(normal[re.sub(r"[-_.]+", "-", name.lower())] == version for name, version in pins.items()), pins
    # the EE's base and interpreter; the Java runtime ansible-rulebook needs (hack/host-deps.sh: 17)
    assert de["images"] == ee["images"] and deps["python_interpreter"] == ee["dependencies"]["python_interpreter"]
    assert deps["system"] == ["java-17-openjdk-headless [platform:rpm]"]
    assert {"name": "files/gpuops-platform.tar.gz", "type": "file"} in deps["galaxy"]["collections"]


def test_the_decision_environment_context_carries_the_source_and_rulebooks(de_context):
    text = (de_context / "Containerfile").read_text()
    dev = _pins(REPO / "requirements/dev.txt")
    refs = f"ansible-core=={dev['ansible-core']} ansible-runner=={dev['ansible-runner']}"
    assert f'ARG ANSIBLE_INSTALL_REFS="{refs}"' in text and "RUN ansible-rulebook --version" in text
    assert "helm" not in text and not (de_context / "_build/files/helm").exists()
    assert f"ansible-rulebook=={dev['ansible-rulebook']}" in (de_context / "_build/requirements.txt").read_text()
    assert "java-17-openjdk-headless" in (de_context / "_build/bindep.txt").read_text()
    req = yaml.safe_load((de_context / "_build/requirements.yml").read_text())
    assert {"name": "files/gpuops-platform.tar.gz", "type": "file"} in req["collections"]
    with tarfile.open(de_context / "_build/files/gpuops-platform.tar.gz") as tar:
        names = set(tar.getnames())
        rulebook = yaml.safe_load(tar.extractfile("extensions/eda/rulebooks/gpu_health_controller.yml").read())  # type: ignore[union-attr]
    assert "extensions/eda/plugins/event_source/alertmanager.py" in names
    assert "extensions/eda/rulebooks/gpu_health.yml" in names and "decision-environment.yml" not in names
    # the activation's rulebook takes its events from the source the image carries
    assert "gpuops.platform.alertmanager" in rulebook[0]["sources"][0]

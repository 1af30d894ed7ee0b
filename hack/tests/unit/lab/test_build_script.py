"""hack/cluster/build.sh: reuse a good cache, rebuild a corrupted one, name a missing Go. A fake `go`
on PATH stands in for the compiler so these cases run in milliseconds."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from gpuops_lab.config import BUILD_SCRIPT, read_versions

FAKE_GO = """#!/bin/sh
echo "$@" >> "$FAKE_GO_LOG"
case "$1" in
  env) echo /nonexistent ;;
  install) for a; do :; done; name=$(basename "${a%@*}"); printf 'rebuilt' > "$GOBIN/$name" ;;
esac
"""


def _run(tmp_path: Path, path_dirs: list[Path], what: str = "helm") -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": ":".join(str(p) for p in path_dirs),
        "HOME": str(tmp_path),
        "GPUOPS_CACHE": str(tmp_path / "cache"),
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
    }
    return subprocess.run(["/bin/bash", str(BUILD_SCRIPT), what], env=env, capture_output=True, text=True, check=False)


def _fake_go(tmp_path: Path) -> Path:
    d = tmp_path / "fakebin"
    d.mkdir()
    (d / "go").write_text(FAKE_GO)
    (d / "go").chmod(0o755)
    return d


def _system_dirs() -> list[Path]:
    return [Path(p) for p in ("/usr/bin", "/bin")]


def _helm_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "bin" / f"helm-v{read_versions()['HELM_VERSION']}"


def _seed(tmp_path: Path, content: bytes, stamp_of: bytes) -> Path:
    d = _helm_dir(tmp_path)
    d.mkdir(parents=True)
    (d / "helm").write_bytes(content)
    (d / "helm").chmod(0o755)
    (d / "SHA256SUMS").write_text(f"{hashlib.sha256(stamp_of).hexdigest()}  helm\n")
    return d


def test_good_cache_is_reused(tmp_path):
    _seed(tmp_path, b"good", b"good")
    r = _run(tmp_path, [_fake_go(tmp_path), *_system_dirs()])
    assert r.returncode == 0, r.stderr
    assert "cached" in r.stdout
    assert not (tmp_path / "go.log").exists()


def test_corrupted_cache_is_rebuilt(tmp_path):
    d = _seed(tmp_path, b"truncated", b"the real binary")
    r = _run(tmp_path, [_fake_go(tmp_path), *_system_dirs()])
    assert r.returncode == 0, r.stderr
    assert "install" in (tmp_path / "go.log").read_text()
    assert (d / "helm").read_text() == "rebuilt"
    assert subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=d, capture_output=True, check=False).returncode == 0


def test_missing_go_says_what_to_install(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    os.symlink("/usr/bin/dirname", empty / "dirname")
    r = _run(tmp_path, [empty])
    assert r.returncode == 3
    assert "'go' not found" in r.stderr and "install Go" in r.stderr


# The upstream NFD chart (issue 27 §6): a cache entry of its own, fetched with `go mod download -json` (its "Dir"),
# copied out of the module and stamped; a fresh machine whose binaries are cached still fetches it.
FAKE_GO_DOWNLOAD = """#!/bin/sh
echo "$@" >> "$FAKE_GO_LOG"
case "$1" in
  mod) printf '{\\n\\t"Path": "sigs.k8s.io/node-feature-discovery",\\n' ;
       printf '\\t"Dir": "%s",\\n\\t"Sum": "h1:x"\\n}\\n' "$FAKE_MOD_DIR" ;;
esac
"""


def _nfd_chart_run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    mod = tmp_path / "gomod" / "node-feature-discovery@v0.19.0"
    chart = mod / "deployment" / "helm" / "node-feature-discovery"
    if not chart.exists():
        (chart / "crds").mkdir(parents=True)
        (chart / "Chart.yaml").write_text("apiVersion: v2\nname: node-feature-discovery\nversion: 0.2.1\n")
        (chart / "crds" / "nfd-api-crds.yaml").write_text("kind: CustomResourceDefinition\n")
        (chart / "Chart.yaml").chmod(0o444)  # the module cache is read-only
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    (d / "go").write_text(FAKE_GO_DOWNLOAD)
    (d / "go").chmod(0o755)
    env = {
        "PATH": f"{d}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GPUOPS_CACHE": str(tmp_path / "cache"),
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "FAKE_MOD_DIR": str(mod),
    }
    argv = ["/bin/bash", str(BUILD_SCRIPT), "nfd-chart"]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return r, tmp_path / "cache" / "charts" / f"node-feature-discovery-v{read_versions()['NFD_VERSION']}"


def test_nfd_chart_is_fetched_from_the_module_then_reused(tmp_path):
    r, out = _nfd_chart_run(tmp_path)
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "go.log").read_text()
    assert f"mod download -json sigs.k8s.io/node-feature-discovery@v{read_versions()['NFD_VERSION']}" in log
    assert (out / "node-feature-discovery" / "Chart.yaml").read_text().endswith("version: 0.2.1\n")
    assert (out / "SHA256SUMS").read_text().splitlines()[0].endswith("  node-feature-discovery/Chart.yaml")
    (tmp_path / "go.log").unlink()
    r = _nfd_chart_run(tmp_path)[0]
    assert r.returncode == 0 and "cached in" in r.stdout and not (tmp_path / "go.log").exists()


def test_nfd_chart_changed_in_the_cache_is_fetched_again(tmp_path):
    out = _nfd_chart_run(tmp_path)[1]
    (out / "node-feature-discovery" / "Chart.yaml").write_text("tampered\n")
    r = _nfd_chart_run(tmp_path)[0]
    assert r.returncode == 0, r.stderr
    assert "fetching" in r.stdout and "tampered" not in (out / "node-feature-discovery" / "Chart.yaml").read_text()


def test_nfd_chart_step_is_in_all_and_demo():
    text = BUILD_SCRIPT.read_text()
    for target in ("all", "demo"):
        (line,) = [x for x in text.splitlines() if x.strip().startswith(f"{target})")]
        assert "build_nfd_chart;" in line, target


def _sriov_chart_run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """build.sh sriov-chart with a fake `go`: upstream's deployment/sriov-network-operator-chart (version 0.0.0-dev)."""
    version = read_versions()["SRIOV_VERSION"]
    mod = tmp_path / "gomod" / f"sriov-network-operator@v{version}"
    chart = mod / "deployment" / "sriov-network-operator-chart"
    if not chart.exists():
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text("apiVersion: v2\nname: sriov-network-operator-chart\nversion: 0.0.0-dev\n")
        (chart / "templates" / "configmap.yaml").write_text("kind: ConfigMap\n")
        (chart / "Chart.yaml").chmod(0o444)
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    (d / "go").write_text(FAKE_GO_DOWNLOAD)
    (d / "go").chmod(0o755)
    env = {
        "PATH": f"{d}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GPUOPS_CACHE": str(tmp_path / "cache"),
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "FAKE_MOD_DIR": str(mod),
    }
    argv = ["/bin/bash", str(BUILD_SCRIPT), "sriov-chart"]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return r, tmp_path / "cache" / "charts" / f"sriov-network-operator-chart-v{version}"


def test_sriov_chart_is_fetched_from_the_module_then_reused(tmp_path):
    r, out = _sriov_chart_run(tmp_path)
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "go.log").read_text()
    mod = "github.com/k8snetworkplumbingwg/sriov-network-operator"
    assert f"mod download -json {mod}@v{read_versions()['SRIOV_VERSION']}" in log
    chart = out / "sriov-network-operator-chart"
    assert (chart / "Chart.yaml").read_text().endswith("version: 0.0.0-dev\n")
    assert (chart / "templates" / "configmap.yaml").is_file()
    assert [line.split("  ")[1] for line in (out / "SHA256SUMS").read_text().splitlines()] == [
        "sriov-network-operator-chart/Chart.yaml",
        "sriov-network-operator-chart/templates/configmap.yaml",
    ]
    (tmp_path / "go.log").unlink()
    r = _sriov_chart_run(tmp_path)[0]
    assert r.returncode == 0 and "sriov chart" in r.stdout and "cached in" in r.stdout
    assert not (tmp_path / "go.log").exists()
    (chart / "templates" / "configmap.yaml").write_text("tampered\n")
    r = _sriov_chart_run(tmp_path)[0]
    assert r.returncode == 0 and "fetching" in r.stdout, r.stderr
    assert (chart / "templates" / "configmap.yaml").read_text() == "kind: ConfigMap\n"


def test_sriov_chart_step_is_in_all_and_demo():
    """The chart repository packages every upstream chart (gpuops_lab.charts), so `demo` fetches it too although it
    builds no SR-IOV operator."""
    text = BUILD_SCRIPT.read_text()
    for target in ("all", "demo"):
        (line,) = [x for x in text.splitlines() if x.strip().startswith(f"{target})")]
        assert "build_sriov_chart;" in line, target


# upstream charts fetched by their own step: step, module, directory in it, chart, version key (both served by the
# chart repository, config.UPSTREAM_CHARTS)
FETCHED = {
    "kueue": ("kueue-chart", "sigs.k8s.io/kueue", "charts/kueue", "KUEUE_VERSION"),
    "volcano": ("volcano-chart", "volcano.sh/volcano", "installer/helm/chart/volcano", "VOLCANO_VERSION"),
}


def _checked_chart_run(tmp_path: Path, name: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """build.sh <name>-chart with a fake `go` whose module holds the chart (a Chart.yaml and one template)."""
    step, _mod, sub, key = FETCHED[name]
    version = read_versions()[key]
    root = tmp_path / "gomod" / f"{name}@v{version}"
    chart = root / sub
    if not chart.exists():
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
        (chart / "templates" / "a.yaml").write_text("kind: ConfigMap\n")
        (chart / "Chart.yaml").chmod(0o444)
    d = tmp_path / "fakebin"
    d.mkdir(exist_ok=True)
    (d / "go").write_text(FAKE_GO_DOWNLOAD)
    (d / "go").chmod(0o755)
    env = {
        "PATH": f"{d}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GPUOPS_CACHE": str(tmp_path / "cache"),
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "FAKE_MOD_DIR": str(root),
    }
    r = subprocess.run(["/bin/bash", str(BUILD_SCRIPT), step], env=env, capture_output=True, text=True, check=False)
    return r, tmp_path / "cache" / "charts" / f"{name}-v{version}"


@pytest.mark.parametrize("name", sorted(FETCHED))
def test_checked_chart_is_fetched_from_the_module_then_reused(tmp_path, name):
    step, mod, _sub, key = FETCHED[name]
    r, out = _checked_chart_run(tmp_path, name)
    assert r.returncode == 0, r.stderr
    assert f"mod download -json {mod}@v{read_versions()[key]}" in (tmp_path / "go.log").read_text()
    assert [line.split("  ")[1] for line in (out / "SHA256SUMS").read_text().splitlines()] == [
        f"{name}/Chart.yaml",
        f"{name}/templates/a.yaml",
    ]
    (tmp_path / "go.log").unlink()
    r = _checked_chart_run(tmp_path, name)[0]
    assert r.returncode == 0 and f"{name} chart" in r.stdout and "cached in" in r.stdout
    assert not (tmp_path / "go.log").exists()
    (out / name / "templates" / "a.yaml").write_text("tampered\n")
    r = _checked_chart_run(tmp_path, name)[0]
    assert r.returncode == 0 and "fetching" in r.stdout, r.stderr
    assert (out / name / "templates" / "a.yaml").read_text() == "kind: ConfigMap\n"


def _steps():
    return {
        line.strip().split(")")[0]: {s.strip() for s in line.split(")", 1)[1].split(";")}
        for line in BUILD_SCRIPT.read_text().splitlines()
        if line.strip().startswith(("all)", "demo)"))
    }


def test_volcano_chart_step_is_in_all_and_demo_its_binaries_in_all_only():
    """The chart repository serves Volcano's chart (it packages every served chart, so the demo's build fetches it
    too); Volcano's binaries only the tests run (the demo installs no Volcano)."""
    steps = _steps()
    assert "build_volcano_chart" in steps["all"] and "build_volcano_chart" in steps["demo"]
    assert "build_volcano" in steps["all"] and "build_volcano" not in steps["demo"]


def test_kueue_chart_step_is_in_all_and_demo():
    """The chart repository serves Kueue's upstream chart (the demo's site.yml installs it), so both fetch it."""
    steps = _steps()
    for target in ("all", "demo"):
        assert {"build_kueue", "build_kueue_chart"} <= steps[target], target

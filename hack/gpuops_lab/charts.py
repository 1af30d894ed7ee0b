"""The local Helm chart repository: the upstream charts a registry serves (config.UPSTREAM_CHARTS, fetched from their
Go module zips into the build cache by hack/cluster/build.sh) and every fixture chart under tests/fixtures/charts (any
depth, one Chart.yaml per chart version; our own charts, for what no reachable registry serves) are packaged with the
real helm and indexed; the lab serves the directory on 127.0.0.1 - the same code path as a user's air-gapped mirror.
An upstream chart replaces a fixture copy of the same name and version (a parent fixture's vendored subchart)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from .config import CHARTS_DIR, CHECKED_CHARTS, UPSTREAM_CHARTS, LabConfig
from .errors import LabError


def missing_upstream(cfg: LabConfig, checked: bool = True) -> list[str]:
    """The upstream charts not (or not completely) in the build cache, as `<name> chart` for the build's report: those
    the repository serves, and with ``checked`` those only the tests read (config.CHECKED_CHARTS; not in the demo's
    build)."""
    out = []
    for name in [*UPSTREAM_CHARTS, *(CHECKED_CHARTS if checked else ())]:
        chart = cfg.upstream_chart_dir(name)
        if not (chart.parent / "SHA256SUMS").is_file() or not (chart / "Chart.yaml").is_file():
            out.append(f"{name} chart")
    return out


def package_argvs(cfg: LabConfig, out: Path, fixtures: Path = CHARTS_DIR) -> list[list[str]]:
    """The `helm package` argvs, fixtures first, then the upstream charts at their pinned versions (upstream's
    Chart.yaml in git carries a placeholder version; its release sets the real one when packaging, as this does)."""
    helm = str(cfg.binary("helm"))
    upstream = {(name, cfg.upstream_chart_version(name)) for name in UPSTREAM_CHARTS}
    argvs = []
    for chart in sorted(fixtures.glob("**/Chart.yaml")):
        meta = yaml.safe_load(chart.read_text())
        if (meta["name"], str(meta["version"]).lstrip("v")) in upstream:
            continue
        argvs.append([helm, "package", str(chart.parent), "--destination", str(out)])
    for name in UPSTREAM_CHARTS:
        version = cfg.upstream_chart_version(name)
        chart = cfg.upstream_chart_dir(name)
        if not (chart / "Chart.yaml").is_file():
            raise LabError(f"upstream chart {name} {version} is not in {chart}: run hack/cluster/build.sh all")
        versions = ["--version", version, "--app-version", f"v{version}"]
        argvs.append([helm, "package", str(chart), *versions, "--destination", str(out)])
    return argvs


def build_repo(cfg: LabConfig) -> list[str]:
    helm = str(cfg.binary("helm"))
    out = cfg.chart_repo_dir
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    packaged = []
    for argv in package_argvs(cfg, out):
        r = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
        if r.returncode != 0:
            raise LabError(f"helm package {argv[2]} failed: {r.stderr.strip() or r.stdout.strip()}")
        packaged.append(r.stdout.strip().rsplit("/", 1)[-1])
    r = subprocess.run(
        [helm, "repo", "index", str(out), "--url", cfg.chart_repo_url],  # noqa: S603
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise LabError(f"helm repo index {out} failed: {r.stderr.strip()}")
    return packaged


def install_argv(
    cfg: LabConfig, chart: str, release: str, namespace: str, values_file: Path | None = None
) -> list[str]:
    """`helm upgrade --install` of a served upstream chart at its pinned version from the lab's repository, waited on
    (the lab's own releases of the charts its kubelet runs: kueue.py, volcano.py)."""
    argv = [
        str(cfg.binary("helm")),
        f"--kubeconfig={cfg.kubeconfig}",
        "upgrade",
        "--install",
        release,
        chart,
        f"--repo={cfg.chart_repo_url}",
        f"--version={cfg.upstream_chart_version(chart)}",
        f"--namespace={namespace}",
        "--create-namespace",
        "--wait",
        "--timeout=180s",
    ]
    return [*argv, f"--values={values_file}"] if values_file else argv

"""The local Helm chart repository: every fixture chart under tests/fixtures/charts (any depth, one
Chart.yaml per chart version) is packaged with the real helm and indexed; the lab serves the directory
on 127.0.0.1 - the same code path as a user's air-gapped mirror."""

from __future__ import annotations

import shutil
import subprocess

from .config import CHARTS_DIR, LabConfig
from .errors import LabError


def build_repo(cfg: LabConfig) -> list[str]:
    helm = str(cfg.binary("helm"))
    out = cfg.chart_repo_dir
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    packaged = []
    for chart in sorted(CHARTS_DIR.glob("**/Chart.yaml")):
        r = subprocess.run(
            [helm, "package", str(chart.parent), "--destination", str(out)],  # noqa: S603
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise LabError(f"helm package {chart.parent} failed: {r.stderr.strip() or r.stdout.strip()}")
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

"""Fixtures of the host-simulation tests: simulated host trees and a way to run commands inside them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HACK = REPO / "hack"
PROFILES = ("dgx-h100", "pcie-l40s", "amd-mi300x", "cpu-only")


@pytest.fixture(scope="session")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One pristine tree per profile, shared: tests that change a tree build their own (`fresh`)."""
    from gpuops_lab.hostsim import build_tree

    base = tmp_path_factory.mktemp("hostsim")
    return {p: Path(build_tree(p, base / p)["tree"]) for p in PROFILES}


@pytest.fixture
def fresh(tmp_path: Path) -> Callable[..., Path]:
    from gpuops_lab.hostsim import build_tree

    def make(profile: str | dict, name: str = "h") -> Path:
        return Path(build_tree(profile, tmp_path / name)["tree"])

    return make


def run_in(tree: Path, script: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run a shell script inside the tree's namespace (python -m gpuops_lab.hostsim run)."""
    assert os.geteuid() == 0, "the host simulation's namespaces need root: run the tests as root"
    env = dict(os.environ, PYTHONPATH=str(HACK))
    return subprocess.run(
        [sys.executable, "-m", "gpuops_lab.hostsim", "run", "--tree", str(tree), "--", "sh", "-c", script],
        capture_output=True, text=True, env=env, timeout=timeout, check=False,
    )

"""Shared pytest fixtures: the lab's tests (unit: no cluster; integration: the local lab, the same
fixtures as the product's integration tests, from hack/gpuops_lab/testing.py)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))

from gpuops_lab.testing import Cluster, add_nodes, cluster, core, namespace, volcano_release  # noqa: E402

__all__ = ["Cluster", "add_nodes", "cluster", "core", "namespace", "volcano_release"]

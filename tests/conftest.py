"""Shared pytest fixtures: the local lab (a real control plane) for integration tests. The fixtures live
with the lab (hack/gpuops_lab/testing.py); the lab's own tests (hack/tests) use the same ones."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

from gpuops_lab.testing import Cluster, add_nodes, cluster, core, namespace, volcano_release  # noqa: E402

__all__ = ["Cluster", "add_nodes", "cluster", "core", "namespace", "volcano_release"]

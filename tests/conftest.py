"""Shared pytest fixtures: the local lab (a real control plane) for integration tests."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))


@dataclass
class Cluster:
    lab: object
    cfg: object
    kubeconfig: str
    api_client: object
    chart_repo_url: str


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The local control plane, started once per session (reused when already up). Never skips: when
    the lab cannot start, every test that needs it errors with the reason (which component, its log)."""
    from gpuops_lab.cluster import Lab
    from gpuops_lab.config import LabConfig
    from kubernetes import config

    cfg = LabConfig.load()
    lab = Lab(cfg, say=lambda m: print(m, file=sys.stderr))
    lab.up()
    api = config.new_client_from_config(str(cfg.kubeconfig))
    yield Cluster(lab, cfg, str(cfg.kubeconfig), api, cfg.chart_repo_url)
    lab.check()  # a component that died during the session fails the run, naming its log


@pytest.fixture
def core(cluster: Cluster):
    from kubernetes import client

    return client.CoreV1Api(cluster.api_client)


@pytest.fixture
def namespace(cluster: Cluster, core) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    cluster.lab.wait_namespace_sa(name)
    yield name
    core.delete_namespace(name)


@pytest.fixture
def add_nodes(cluster: Cluster, core) -> Iterator[Callable[..., list[str]]]:
    """add_nodes(profile, count) -> names: simulated nodes removed after the test."""
    from gpuops_lab import nodes

    made: list[str] = []

    def _add(profile: str, count: int = 1) -> list[str]:
        names = nodes.add(core, profile, count, prefix=f"t{uuid.uuid4().hex[:6]}-{profile}")
        made.extend(names)
        return names

    yield _add
    nodes.remove(core, made)

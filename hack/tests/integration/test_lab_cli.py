"""The lab's command line: node add/remove, clear errors for bad input, port conflicts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from gpuops_lab.cluster import Lab
from gpuops_lab.config import LabConfig
from gpuops_lab.errors import LabError

REPO = Path(__file__).resolve().parents[3]


def _cli(*args, env=None):
    e = {**os.environ, "PYTHONPATH": str(REPO / "hack"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "gpuops_lab", *args], capture_output=True, text=True, env=e, check=False
    )


def test_nodes_add_and_remove_by_profile(cluster, core):
    r = _cli("nodes", "add", "amd-mi300x", "-n", "3", "--prefix", "cli-mi300x")
    assert r.returncode == 0, r.stderr
    names = r.stdout.split(":", 1)[1].split()
    assert len(names) == 3
    assert {
        n.metadata.name for n in core.list_node(label_selector="gpuops.io/hardware-profile=amd-mi300x").items
    } >= set(names)
    r = _cli("nodes", "remove", *names)
    assert r.returncode == 0, r.stderr
    left = {n.metadata.name for n in core.list_node().items}
    assert not set(names) & left


def test_unknown_profile_is_a_clear_error(cluster, core):
    before = {n.metadata.name for n in core.list_node().items}
    r = _cli("nodes", "add", "dgx-b300")
    assert r.returncode == 2
    assert "unknown hardware profile 'dgx-b300'" in r.stderr and "dgx-h100" in r.stderr
    assert {n.metadata.name for n in core.list_node().items} == before


def test_table_lists_inventory_nodes(cluster):
    r = _cli("nodes", "sync-inventory")
    assert r.returncode == 0, r.stderr
    r = _cli("table", "--wait", "30")
    assert "dgx-h100-0" in r.stdout and "pci-10de.present" in r.stdout, r.stdout


def test_port_in_use_is_named_and_nothing_starts(cluster, tmp_path):
    with socket.socket() as s:
        # a port below the kernel's ephemeral range (the lab refuses those before it looks whether they are free)
        for port in range(31000, 32000):
            try:
                s.bind(("127.0.0.1", port))
                break
            except OSError:
                continue
        else:
            raise AssertionError("no free port in 31000-31999 to hold")
        s.listen()
        cfg = LabConfig.load(
            {**os.environ, "GPUOPS_LAB_STATE": str(tmp_path / "lab2"), "GPUOPS_LAB_ETCD_PORT": str(port)}
        )
        lab = Lab(cfg, say=lambda m: None)
        try:
            lab.up()
        except LabError as exc:
            assert f"port {port} (etcd)" in str(exc) and "already in use" in str(exc)
        else:
            raise AssertionError("up() started with its etcd port taken")
    assert not (tmp_path / "lab2" / "run").exists()

"""The gpuops.platform.gpu_nodes inventory plugin against the real control plane: `ansible-inventory` builds the
groups from live nodes (NFD-labelled simulated nodes, one of them with a time-slicing config entry and a GPU label
the operator would set), compose and keyed_groups work, a cached inventory survives an unreachable API server, and
without the cache the error names the server."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _inventory(tmp_path, config, name="gpu_nodes.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"plugin": "gpuops.platform.gpu_nodes", **config}))
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_INVENTORY_ENABLED="gpuops.platform.gpu_nodes",
        ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="true",
    )
    r = subprocess.run(
        ["ansible-inventory", "-i", str(path), "--list"], capture_output=True, text=True, env=env, check=False
    )
    return r, (_plain(json.loads(r.stdout)) if r.returncode == 0 else None)


def _plain(value):
    """ansible-inventory --list marks strings a plugin set as unsafe ({"__ansible_unsafe": ...}): the values."""
    if isinstance(value, dict):
        return (
            value["__ansible_unsafe"]
            if set(value) == {"__ansible_unsafe"}
            else {k: _plain(v) for k, v in value.items()}
        )
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _members(inv, group):
    return set((inv.get(group) or {}).get("hosts") or [])


def test_groups_from_the_live_cluster_and_the_cache(cluster, core, add_nodes, tmp_path):
    tag = uuid.uuid4().hex[:8]
    (dgx,) = add_nodes("dgx-h100", 1)
    (l40s,) = add_nodes("pcie-l40s", 1)
    (cpu,) = add_nodes("cpu-only", 1)
    for name in (dgx, l40s, cpu):
        core.patch_node(name, {"metadata": {"labels": {"gpuops.test/inventory": tag}}})
    core.patch_node(dgx, {"metadata": {"labels": {"nvidia.com/mig.capable": "true"}}})
    core.patch_node(l40s, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "l40s-shared"}}})

    # without a selector: the GPU nodes (NFD's pci-10de label), never the CPU node
    r, inv = _inventory(tmp_path, {"kubeconfig": cluster.kubeconfig})
    assert r.returncode == 0, r.stderr
    assert {dgx, l40s} <= _members(inv, "gpu_nodes") and cpu not in _members(inv, "gpu_nodes")

    # a selector: exactly the nodes it matches; compose and keyed_groups over gpuops_node
    cache = tmp_path / "cache"
    config = {
        "kubeconfig": cluster.kubeconfig,
        "node_selector": f"gpuops.test/inventory={tag}",
        "compose": {"nic": "'nic' if 'feature.node.kubernetes.io/pci-15b3.present' in gpuops_node.labels else 'none'"},
        "keyed_groups": [{"key": "gpuops_node.labels['gpuops.io/hardware-profile']", "prefix": "profile"}],
        "cache": True,
        "cache_plugin": "ansible.builtin.jsonfile",
        "cache_connection": str(cache),
    }
    r, inv = _inventory(tmp_path, config)
    assert r.returncode == 0, r.stderr
    assert _members(inv, "gpu_nodes") == {dgx, l40s, cpu}
    assert _members(inv, "gpu_vendor_nvidia") == {dgx, l40s}
    assert _members(inv, "mig_capable") == {dgx}
    assert _members(inv, f"profile_{'dgx_h100'}") == {dgx} and _members(inv, "profile_cpu_only") == {cpu}
    hostvars = inv["_meta"]["hostvars"]
    assert hostvars[dgx]["ansible_host"] and hostvars[dgx]["gpuops_node"]["vendor"] == "nvidia"
    assert hostvars[dgx]["nic"] == "nic" and hostvars[cpu]["nic"] == "none"
    assert _members(inv, "rdma_capable") == {dgx, l40s}
    assert any(cache.iterdir()), "the inventory cache was not written"

    # the API server unreachable: the cache answers; without the cache the error names the server
    unreachable = {**config, "host": "https://127.0.0.1:9", "kubeconfig": None}
    unreachable.pop("kubeconfig")
    r2, cached = _inventory(tmp_path, unreachable)
    assert r2.returncode == 0, r2.stderr
    assert _members(cached, "gpu_nodes") == {dgx, l40s, cpu}
    r3 = _inventory(tmp_path, {**unreachable, "cache": False}, name="nocache-gpu_nodes.yml")[0]
    assert r3.returncode != 0
    assert "gpuops.platform.gpu_nodes (https://127.0.0.1:9): cannot list nodes" in r3.stderr, r3.stderr

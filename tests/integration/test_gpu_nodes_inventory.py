"""The gpuops.platform.gpu_nodes inventory plugin against the real control plane: `ansible-inventory` builds the
groups from live nodes (NFD-labelled simulated nodes, one of them with a time-slicing config entry and a GPU label
the operator would set), compose and keyed_groups work, a cached inventory survives an unreachable API server, and
without the cache the error names the server. The cache is the inventory of one cluster (issue 27): another cluster's
kubeconfig behind the same inventory file gets that cluster's answer, never the cached one, and a wrong kubeconfig
fails ansible-inventory (exit status not 0) - with the project's ansible.cfg alone, which makes an unparsed source a
failure."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _inventory(tmp_path, config, name="gpu_nodes.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"plugin": "gpuops.platform.gpu_nodes", **config}))
    # the project's ansible.cfg decides what an unparsed source is (no ANSIBLE_INVENTORY_* of the test's own)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_INVENTORY", "K8S_AUTH"))}
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
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

    # the API server unreachable without the cache: the error names the server
    unreachable = {**config, "host": "https://127.0.0.1:9", "cache": False}
    unreachable.pop("kubeconfig")
    r3 = _inventory(tmp_path, unreachable, name="nocache-gpu_nodes.yml")[0]
    assert r3.returncode != 0
    assert "gpuops.platform.gpu_nodes (https://127.0.0.1:9): cannot list nodes" in r3.stderr, r3.stderr


class _Proxy:
    """A TCP relay on 127.0.0.1 to the lab's API server: the same cluster at an address that can go down."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream, self.conns = upstream, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client = self.sock.accept()[0]
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def _kubeconfig_at(tmp_path, cluster, server: str, name: str) -> str:
    doc = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    base = Path(cluster.kubeconfig).parent
    for c in doc["clusters"]:
        c["cluster"]["server"] = server
    for entry, keys in (
        (doc["clusters"], ("certificate-authority",)),
        (doc["users"], ("client-certificate", "client-key")),
    ):
        for e in entry:
            part = e.get("cluster") or e.get("user")
            for k in keys:
                if k in part and not os.path.isabs(part[k]):
                    part[k] = str(base / part[k])
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_the_cache_answers_for_its_own_cluster_only(cluster, add_nodes, tmp_path):
    """cache: true. The cluster's API server down (its address refusing): the cache answers, as before. The same
    inventory file with another cluster's kubeconfig: that cluster is asked (and here fails, being down) - before,
    the first cluster's nodes came back, rc 0. A kubeconfig that does not exist: rc not 0, the message names it."""
    (dgx,) = add_nodes("dgx-h100", 1)
    server = yaml.safe_load(Path(cluster.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    host, port = server.split("//", 1)[1].rsplit(":", 1)
    proxy = _Proxy((host, int(port)))
    config = {
        "kubeconfig": _kubeconfig_at(tmp_path, cluster, f"https://127.0.0.1:{proxy.port}", "relayed"),
        "cache": True,
        "cache_plugin": "ansible.builtin.jsonfile",
        "cache_connection": str(tmp_path / "cache"),
    }
    try:
        r, inv = _inventory(tmp_path, config)
        assert r.returncode == 0, r.stderr
        assert dgx in _members(inv, "gpu_nodes")
    finally:
        proxy.close()
    r, cached = _inventory(tmp_path, config)
    assert r.returncode == 0, r.stderr  # the same cluster, down: the cache answers
    assert dgx in _members(cached, "gpu_nodes")

    other = _kubeconfig_at(tmp_path, cluster, "https://127.0.0.1:9", "other")
    r, inv = _inventory(tmp_path, {**config, "kubeconfig": other})
    assert r.returncode != 0 and inv is None, r.stdout[-2000:]
    assert "gpuops.platform.gpu_nodes (https://127.0.0.1:9, context" in " ".join(r.stderr.split()), r.stderr[-3000:]

    missing = str(tmp_path / "no-such-kubeconfig")
    r, inv = _inventory(tmp_path, {**config, "kubeconfig": missing})
    assert r.returncode != 0 and inv is None
    err = " ".join(r.stderr.split())
    assert f"kubeconfig {missing} (option kubeconfig, K8S_AUTH_KUBECONFIG) does not exist. Fix:" in err, err[-3000:]

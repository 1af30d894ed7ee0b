"""The gpu_nodes inventory plugin's connection and cache, without a cluster (issue 27): a kubeconfig that is missing,
unreadable or lacks the context is an AnsibleParserError naming the option, the file and the fix, cache or no cache;
the cache is keyed by the cluster (server and context) and the plugin's selection, so another kubeconfig never gets
the previous cluster's nodes, while the same cluster's cache still answers when its API server does not. The cluster
reads are replaced by a stand-in that names the server it was asked (tests/integration/test_gpu_nodes_inventory.py
runs the plugin against the lab)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

COLLECTIONS = Path(__file__).resolve().parents[4] / ".state" / "collections"  # tests/unit/conftest.py links it

# One parse in an interpreter of its own (the collection finder the plugin loader needs is process-wide), as
# ansible-inventory runs it: the plugin loaded by name, the cache written back after the parse. The cluster reads
# (_read_nodes) are replaced by a stand-in: each server has one node named after its port; the servers listed in
# the state file are down; every read is logged there.
SCRIPT = r"""
import json, sys
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([sys.argv[1]])
from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import inventory_loader
from ansible_collections.gpuops.platform.plugins.inventory import gpu_nodes
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s

state_file = sys.argv[3]

def read_nodes(self, params):
    state = json.load(open(state_file))
    settings = _k8s.simple_settings(params)
    if settings is None:  # what the real path does with a missing kubeconfig (the client's own words)
        raise _k8s.KubeConfigError("cannot load Kubernetes connection settings: Invalid kube-config file.")
    server = settings["server"]
    state["reads"].append(server)
    json.dump(state, open(state_file, "w"))
    if server in state["down"]:
        raise _k8s.ClusterAccessError(f"cannot list nodes: connection refused ({server})")
    return [{"name": "node-" + server.rsplit(":", 1)[-1], "groups": ["gpu_nodes"], "address": None, "vars": {}}]

gpu_nodes.InventoryModule._read_nodes = read_nodes
plugin = inventory_loader.get("gpuops.platform.gpu_nodes")
data = InventoryData()
try:
    plugin.parse(data, DataLoader(), sys.argv[2], cache=True)
    plugin.update_cache_if_changed()
except AnsibleParserError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    group = data.groups.get("gpu_nodes")
    print(json.dumps({"hosts": sorted(h.name for h in group.hosts) if group else []}))
"""


def kubeconfig(path, servers: dict[str, str], current: str):
    """A kubeconfig with one context per server (context name -> server URL)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": current,
                "clusters": [{"name": n, "cluster": {"server": s}} for n, s in servers.items()],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in servers],
            }
        )
    )
    return str(path)


class Cluster:
    """The stand-in's state: the servers that are down, and the servers read so far."""

    def __init__(self, path: Path):
        self.path = path
        self.path.write_text(json.dumps({"down": [], "reads": []}))

    @property
    def reads(self) -> list[str]:
        return json.loads(self.path.read_text())["reads"]

    def take_down(self, server: str) -> None:
        state = json.loads(self.path.read_text())
        self.path.write_text(json.dumps({**state, "down": [*state["down"], server]}))


@pytest.fixture
def cluster(tmp_path):
    return Cluster(tmp_path / "cluster.json")


@pytest.fixture
def env(monkeypatch):
    """The environment of the parses (AWX's credential sets K8S_AUTH_KUBECONFIG)."""
    out = dict(os.environ)
    for var in ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "KUBECONFIG"):
        out.pop(var, None)
    return out


class ParseError(Exception):
    pass


@pytest.fixture
def inventory(tmp_path, cluster, env):
    """inventory(config=None, cache=True) -> the hosts of gpu_nodes; ParseError(message) for an
    AnsibleParserError. The source file keeps its path between calls, as in AWX."""
    source = tmp_path / "gpu_nodes.yml"

    def parse(config: dict | None = None, cache: bool = True) -> set[str]:
        source.write_text(
            yaml.safe_dump(
                {
                    "plugin": "gpuops.platform.gpu_nodes",
                    "cache": cache,
                    "cache_plugin": "ansible.builtin.jsonfile",
                    "cache_connection": str(tmp_path / "cache"),
                    **(config or {}),
                }
            )
        )
        r = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(COLLECTIONS), str(source), str(cluster.path)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.splitlines()[-1])
        if "error" in out:
            raise ParseError(out["error"])
        return set(out["hosts"])

    return parse


def test_a_missing_kubeconfig_is_a_parser_error_even_with_a_cache(inventory, tmp_path, env):
    first = kubeconfig(tmp_path / "a", {"a": "https://127.0.0.1:6443"}, "a")
    env["K8S_AUTH_KUBECONFIG"] = first  # AWX's credential sets the kubeconfig this way
    assert inventory() == {"node-6443"}
    missing = str(tmp_path / "no-such-kubeconfig")
    env["K8S_AUTH_KUBECONFIG"] = missing
    with pytest.raises(ParseError) as err:
        inventory()  # before: the cached nodes of the first cluster, rc 0
    msg = str(err.value)
    assert f"kubeconfig {missing} (option kubeconfig, K8S_AUTH_KUBECONFIG) does not exist" in msg, msg
    assert "Fix:" in msg
    with pytest.raises(ParseError, match="does not exist"):
        inventory(cache=False)


@pytest.mark.parametrize(
    ("doc", "expect"),
    [
        ("just: [a, list", "is not a readable kubeconfig"),
        ("apiVersion: v1\nkind: Config\ncontexts: []\nclusters: []\n", "has no current-context"),
        (None, "has no context 'nope' (contexts: a)"),
    ],
)
def test_a_kubeconfig_without_the_cluster_is_a_parser_error(cluster, inventory, tmp_path, doc, expect):
    path = tmp_path / "kubeconfig"
    config = {"kubeconfig": str(path)}
    if doc is None:
        kubeconfig(path, {"a": "https://127.0.0.1:6443"}, "a")
        config["context"] = "nope"
    else:
        path.write_text(doc)
    with pytest.raises(ParseError) as err:
        inventory(config)
    assert expect in str(err.value) and str(path) in str(err.value), str(err.value)
    assert cluster.reads == []


def test_the_cache_is_keyed_by_the_cluster(cluster, inventory, tmp_path, env):
    one = kubeconfig(tmp_path / "one", {"a": "https://127.0.0.1:6443", "b": "https://127.0.0.1:7443"}, "a")
    two = kubeconfig(tmp_path / "two", {"c": "https://127.0.0.1:8443"}, "c")
    env["K8S_AUTH_KUBECONFIG"] = one
    assert inventory() == {"node-6443"}
    assert inventory() == {"node-6443"} and len(cluster.reads) == 1  # the cache answered
    env["K8S_AUTH_KUBECONFIG"] = two  # another cluster, the same inventory file
    assert inventory() == {"node-8443"}  # before: node-6443, the previous cluster's nodes
    env["K8S_AUTH_KUBECONFIG"] = one
    env["K8S_AUTH_CONTEXT"] = "b"  # another context of the same file
    assert inventory() == {"node-7443"}
    env["K8S_AUTH_HOST"] = "https://127.0.0.1:9443"  # the server named outright
    assert inventory() == {"node-9443"}
    assert cluster.reads[1:] == ["https://127.0.0.1:8443", "https://127.0.0.1:7443", "https://127.0.0.1:9443"]


def test_the_cache_still_answers_for_its_own_cluster_when_the_server_is_down(cluster, inventory, tmp_path):
    path = kubeconfig(tmp_path / "k", {"a": "https://127.0.0.1:6443"}, "a")
    assert inventory({"kubeconfig": path}) == {"node-6443"}
    cluster.take_down("https://127.0.0.1:6443")
    assert inventory({"kubeconfig": path}) == {"node-6443"}
    with pytest.raises(ParseError, match=r"\(https://127\.0\.0\.1:6443[,)]"):
        inventory({"kubeconfig": path}, cache=False)


def test_the_selection_is_part_of_the_key(cluster, inventory, tmp_path):
    """Another node_selector in the same file is another inventory, not the cached one."""
    path = kubeconfig(tmp_path / "k", {"a": "https://127.0.0.1:6443"}, "a")
    inventory({"kubeconfig": path})
    inventory({"kubeconfig": path, "node_selector": "pool=a"})
    assert len(cluster.reads) == 2


REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("source", ["file", "directory"])
def test_ansible_inventory_fails_on_a_wrong_kubeconfig_with_the_projects_config(tmp_path, env, source):
    """ansible-inventory with the project's ansible.cfg and nothing else (no ANSIBLE_INVENTORY_* of a test): a wrong
    kubeconfig exits non-zero with the plugin's message - also when the source is a directory whose other files parse
    (inventories/cluster/: the controller and the plugin). Before: warnings, an empty inventory, rc 0."""
    missing = tmp_path / "no-such-kubeconfig"
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "gpu_nodes.yml").write_text(
        yaml.safe_dump({"plugin": "gpuops.platform.gpu_nodes", "kubeconfig": str(missing), "cache": False})
    )
    if source == "directory":
        (inv / "controller.yml").write_text((REPO / "inventories/cluster/controller.yml").read_text())
    env = {k: v for k, v in env.items() if not k.startswith("ANSIBLE_INVENTORY")}
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    r = subprocess.run(
        ["ansible-inventory", "-i", str(inv if source == "directory" else inv / "gpu_nodes.yml"), "--list"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert r.returncode != 0, r.stdout[-2000:] + r.stderr[-2000:]
    err = " ".join(r.stderr.split())
    assert (
        f"gpuops.platform.gpu_nodes: kubeconfig {missing} (option kubeconfig, K8S_AUTH_KUBECONFIG) does not exist"
        in err
    )
    assert "Completely failed to parse inventory source" in err, err[-2000:]

"""gpuops.platform.gpu_host_preflight's action plugin: O(inventory_hosts) becomes O(hosts) from each host's variables
(node name, gpuops_host facts, host_prep's planned fixes in check mode); a host without facts is named; the Node
patches the guards return are ready for one server-side apply."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.gpuops.platform.plugins.action.gpu_host_preflight import hosts_from_inventory

REPO = Path(__file__).resolve().parents[4]
DRIVER = {"nvidia_driver": {"loaded": True, "version": "570.124.06", "installed_version": "570.124.06"}}
PLAIN = {"nouveau": {"loaded": False, "blacklisted": False}}


@pytest.mark.parametrize(
    ("hostvars", "check_mode", "want"),
    [
        (
            {"h1": {"ansible_facts": {"gpuops_host": PLAIN}}},
            False,
            [{"node_name": "h1", "facts": PLAIN, "planned_fixes": []}],
        ),
        (  # the node name the inventory plugin sets wins over the inventory name
            {"h1": {"gpuops_node_name": "node-1", "ansible_facts": {"gpuops_host": PLAIN}}},
            False,
            [{"node_name": "node-1", "facts": PLAIN, "planned_fixes": []}],
        ),
        (  # host_prep's planned fixes count in check mode only
            {"h1": {"ansible_facts": {"gpuops_host": PLAIN}, "host_prep_planned_fixes": ["nouveau"]}},
            True,
            [{"node_name": "h1", "facts": PLAIN, "planned_fixes": ["nouveau"]}],
        ),
        (
            {"h1": {"ansible_facts": {"gpuops_host": PLAIN}, "host_prep_planned_fixes": ["nouveau"]}},
            False,
            [{"node_name": "h1", "facts": PLAIN, "planned_fixes": []}],
        ),
    ],
)
def test_hosts_from_inventory(hostvars, check_mode, want):
    assert hosts_from_inventory(list(hostvars), hostvars, check_mode) == want


@pytest.mark.parametrize(
    ("names", "hostvars", "match"),
    [
        (["h9"], {"h1": {}}, "'h9' is not a host of the inventory"),
        (["h1"], {"h1": {"ansible_facts": {}}}, "h1 has no gpuops_host facts in this run"),
    ],
)
def test_hosts_from_inventory_names_the_host(names, hostvars, match):
    with pytest.raises(AnsibleActionFail, match=match):
        hosts_from_inventory(names, hostvars, False)


def _play(tmp_path: Path, hosts_vars: dict[str, dict], tasks: list[dict], *extra: str) -> subprocess.CompletedProcess:
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps({"all": {"hosts": hosts_vars}}))
    book = tmp_path / "play.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    # a module beside the play that returns the facts it is given, as gpu_host_facts returns the host's
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "given_facts.py").write_text(
        "#!/usr/bin/python\nfrom ansible.module_utils.basic import AnsibleModule\n"
        "m = AnsibleModule(argument_spec={'facts': {'type': 'dict', 'required': True}})\n"
        "m.exit_json(changed=False, ansible_facts=m.params['facts'])\n"
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        ["ansible-playbook", "-i", str(inv), "-c", "local", str(book), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )


def test_inventory_hosts_in_a_play(tmp_path):
    """The role's way: facts set on two hosts, the guards judged for both in one run where the play runs, and the
    patch of the host that needs the label is the one applied."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    hosts = {"localhost": local, "gpu-a": {"gpuops_node_name": "node-a", **local}, "gpu-b": local}
    tasks = [
        {
            "name": "Facts",
            "given_facts": {"facts": {"gpuops_host": "{{ item.1 }}"}},
            "delegate_to": "{{ item.0 }}",
            "delegate_facts": True,
            "loop": [["gpu-a", PLAIN], ["gpu-b", DRIVER]],
        },
        {
            "name": "Guards",
            "gpuops.platform.gpu_host_preflight": {
                "inventory_hosts": ["gpu-a", "gpu-b"],
                "checks": ["driver"],
                "nvidia_driver": "container",
                "exclude_host_driver_nodes": True,
                "fail_on": "never",
            },
            "register": "guards",
        },
        {
            "name": "Keep what the guards returned",
            "ansible.builtin.copy": {"content": "{{ guards.hosts | to_json }}", "dest": str(tmp_path / "guards.json")},
        },
    ]
    r = _play(tmp_path, hosts, tasks)
    assert r.returncode == 0, r.stdout + r.stderr
    results = json.loads((tmp_path / "guards.json").read_text())
    names = [h["node_name"] for h in results]
    patches = [h["node_patch"] for h in results if "node_patch" in h]
    assert names == ["node-a", "gpu-b"]
    assert patches == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-b", "labels": {"nvidia.com/gpu.deploy.driver": "false"}},
        }
    ]


def test_inventory_hosts_without_facts_is_named(tmp_path):
    hosts = {"localhost": {"ansible_connection": "local"}, "gpu-a": {}}
    tasks = [{"name": "Guards", "gpuops.platform.gpu_host_preflight": {"inventory_hosts": ["gpu-a"]}}]
    r = _play(tmp_path, hosts, tasks)
    assert r.returncode != 0
    assert "gpu-a has no gpuops_host facts in this run" in r.stdout

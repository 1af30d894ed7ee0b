"""host_prep on fresh simulated hosts: --check --diff predicts exactly the changes the real run then makes
(per host and per task) and writes nothing (the second run changing nothing is molecule/host_prep's idempotence),
validate.yml alone passes under --check, a short PF address (14:00.0) is accepted, and bad input fails before any
change."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from gpuops_lab.testing import dgx_and_l40s

REPO = Path(__file__).resolve().parents[2]


# The simulation's own bookkeeping, not host state: the runner's identity files and the shims' call
# log (which test_check_diff... reads to prove no mutating command ran).
BOOKKEEPING = ("/.hostsim", "/run/gpuops-sim")
READ_ONLY_MODPROBE = {"-n", "--dry-run", "-c", "--showconfig", "-D", "--show-depends"}


def mutating(call: dict) -> bool:
    """A shim call that would change a real host."""
    tool, argv = call["tool"], call["argv"][1:]
    return (
        tool in ("update-initramfs", "dracut", "rmmod", "depmod", "update-grub")
        or (tool == "modprobe" and not READ_ONLY_MODPROBE & set(argv))
        or (
            tool == "systemctl"
            and bool(argv)
            and argv[0] in ("enable", "disable", "start", "stop", "restart", "daemon-reload")
        )
        or (tool == "apt-get" and "install" in argv)
        or (tool == "setpci" and any("=" in a for a in argv))
    )


def tree_digest(tree: Path) -> str:
    """Every file's content and every link's target in the tree, bookkeeping excepted."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        rel = dirpath[len(str(tree)) :]
        if rel.startswith(BOOKKEEPING):
            continue
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, name)
            h.update(p.encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


@pytest.fixture
def hosts(tmp_path):
    """Two fresh simulated hosts and an inventory for them."""
    made, hv = dgx_and_l40s(tmp_path / "hosts")
    # the short form sriov_vfs accepts (the preflight used to refuse it: sriov-pf-unknown)
    hv["l40s"]["host_prep_sriov_vfs"] = [{"pf": "14:00.0", "num_vfs": 4}]
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hv}}}}))
    trees = {name: Path(info["hostvars"]["gpuops_hostsim_tree"]) for name, info in made.items()}
    return inv, trees


def play(
    inventory: Path, *args: str, playbook: str = "playbooks/prepare_hosts.yml"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    argv = ["ansible-playbook", playbook, "-i", str(inventory), *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, check=False)


def recap(out: str) -> dict[str, dict[str, int]]:
    return {
        m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
        for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", out, re.M)
    }


def changed_tasks(out: str) -> dict[str, set[str]]:
    """{host: {"task name [item]", ...}} for every task result reported as changed."""
    changed: dict[str, set[str]] = defaultdict(set)
    task = None
    for line in out.splitlines():
        m = re.match(r"^TASK \[(.+)\] \*+$", line)
        if m:
            task = m.group(1)
            continue
        m = re.match(r"^changed: \[([^\]]+)\](?: => \(item=(.*)\))?", line)
        if m and task:
            changed[m.group(1)].add(task + (f" [{m.group(2)}]" if m.group(2) else ""))
    return dict(changed)


ROLE = "gpuops.platform.host_prep : "
EXPECTED_CHANGES = {
    "dgx": {
        ROLE + "Blacklist nouveau (modprobe.d, initramfs, unload when unused)",
        ROLE + "Set PCIe ACS on the GPU and RDMA NIC paths",
        ROLE + "Ensure nvidia-fabricmanager matching the host driver, enabled and running",
    },
    "l40s": {
        ROLE + "Blacklist nouveau (modprobe.d, initramfs, unload when unused)",
        ROLE + "Create SR-IOV virtual functions [14:00.0=4]",
    },
}


def test_check_diff_predicts_the_real_run(hosts):
    inv, trees = hosts
    before = {n: tree_digest(t) for n, t in trees.items()}

    r = play(inv, "--check", "--diff")
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr
    predicted = changed_tasks(r.stdout)
    # the diff shows the file contents and register values that would change
    assert "+blacklist nouveau" in r.stdout and "+options nouveau modeset=0" in r.stdout
    assert "sriov_numvfs" in r.stdout
    assert {n: tree_digest(t) for n, t in trees.items()} == before, "check mode wrote to a host"
    for t in trees.values():
        calls = (t / "run/gpuops-sim/calls.log").read_text()
        assert calls, "the shims logged no call at all: the probe is broken"
        ran = [json.loads(c) for c in calls.splitlines()]
        assert not [c for c in ran if mutating(c)], "check mode ran a mutating command"

    r = play(inv)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr
    made = changed_tasks(r.stdout)
    # check mode predicted exactly what the real run changed, host by host and task by task
    assert predicted == made == EXPECTED_CHANGES, (predicted, made)
    assert "reboot_required: true" in r.stdout  # nouveau is in use on the L40S host
    vfs = trees["l40s"] / "sys/bus/pci/devices/0000:14:00.0"
    assert (vfs / "sriov_numvfs").read_text().strip() == "4"
    # (a second run changing nothing is molecule/host_prep's idempotence step, on the same hosts' profiles)


def test_validate_alone_under_check(hosts, tmp_path):
    inv, trees = hosts
    pb = tmp_path / "validate.yml"
    pb.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Validate",
                    "hosts": "gpu_nodes",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Validate host_prep",
                            "ansible.builtin.include_role": {
                                "name": "gpuops.platform.host_prep",
                                "tasks_from": "validate",
                            },
                        }
                    ],
                }
            ]
        )
    )
    # on fresh hosts the validation names what is wrong (read-only, --check)
    before = tree_digest(trees["dgx"])
    r = play(inv, "--check", playbook=str(pb))
    assert r.returncode != 0
    assert "ACS is still enabled" in r.stdout and "fabricmanager" in r.stdout
    assert tree_digest(trees["dgx"]) == before
    # after the role ran, the DGX passes; the L40S still has nouveau in use until it reboots
    assert play(inv).returncode == 0
    r = play(inv, "--check", playbook=str(pb))
    assert r.returncode != 0
    assert "dgx: host preparation validated" in r.stdout
    assert re.search(r"l40s: host validation: 1 finding.*nouveau is blacklisted but still loaded", r.stdout)
    # a (simulated) reboot resets ACS and removes VFs, as Linux does; the boot-time unit (ACS), the udev
    # rule (VFs), the rebuilt initramfs (nouveau) and the enabled service (fabricmanager) bring the
    # prepared state back, so everything validates after it
    for tree in trees.values():
        subprocess.run(
            [sys.executable, "-m", "gpuops_lab.hostsim", "reboot", "--tree", str(tree)],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(REPO / "hack")},
        )
    r = play(inv, "--check", playbook=str(pb))
    assert r.returncode == 0, r.stdout[-5000:]
    assert "dgx: host preparation validated" in r.stdout and "l40s: host preparation validated" in r.stdout


@pytest.mark.parametrize(
    ("vfs", "expect"),
    [
        ([{"pf": "0000:14:00.0", "num_vfs": 9}], "sriov-vfs-above-limit"),
        ([{"pf": "0000:14:00.0", "num_vfs": -1}], "num_vfs must be an integer >= 0"),
        ([{"pf": "14:00", "num_vfs": 2}], "sriov-pf-invalid"),
        ([{"pf": "eth0;reboot", "num_vfs": 2}], "sriov-pf-unknown"),
    ],
)
def test_bad_vf_requests_fail_before_any_change(hosts, vfs, expect):
    inv, trees = hosts
    data = yaml.safe_load(inv.read_text())
    data["all"]["children"]["gpu_nodes"]["hosts"]["l40s"]["host_prep_sriov_vfs"] = vfs
    inv.write_text(yaml.safe_dump(data))
    before = tree_digest(trees["l40s"])
    r = play(inv, "--limit", "l40s", "-e", json.dumps({"ansible_python_interpreter_unused": sys.executable}))
    assert r.returncode != 0
    assert expect in r.stdout, r.stdout[-3000:]
    assert tree_digest(trees["l40s"]) == before


def test_an_nvswitch_host_without_a_driver_is_refused_before_any_change(tmp_path):
    """Issue 27: host_prep_nvidia_driver: host on an NVSwitch host with no driver yet. The preflight passed with an
    info finding, the role changed nouveau and ACS, then fabricmanager failed "no NVIDIA driver", and every rerun the
    same way. Now the preflight refuses it, naming the fix, and the host is untouched - on every run."""
    from gpuops_lab import profiles
    from gpuops_lab.hostsim.hosts import create_host

    prof = profiles.load("dgx-h100")
    prof["host"]["nvidia_driver"] = None
    prof["host"]["modules_loaded"] = [m for m in prof["host"]["modules_loaded"] if not str(m).startswith("nvidia")]
    made = create_host(prof, "dgx-nodrv", tmp_path / "hosts")
    hv = {"dgx-nodrv": dict(made["hostvars"], host_prep_nvidia_driver="host")}
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hv}}}}))
    tree = Path(made["hostvars"]["gpuops_hostsim_tree"])
    before = tree_digest(tree)
    for _run in range(2):
        r = play(inv)
        assert r.returncode != 0
        assert "fabricmanager-needs-driver" in r.stdout and "install the NVIDIA driver on the host first" in r.stdout
        assert "Blacklist nouveau" not in r.stdout and "Set PCIe ACS" not in r.stdout, r.stdout[-3000:]
        assert tree_digest(tree) == before

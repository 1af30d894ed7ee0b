"""The runner presents a tree at the real paths; nothing it runs changes the machine; Ansible modules
run through the python wrapper see the simulated host."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from gpuops_lab.hostsim import probe
from hostsim_util import HACK, REPO, run_in

REAL_PATHS = [
    "/etc/modprobe.d/gpuops-test.conf",
    "/usr/lib/modules/gpuops-test",
    "/run/gpuops-test",
    "/var/lib/gpuops-test",
    "/boot/gpuops-test",
    "/opt/gpuops-test",
]


def test_real_paths_show_the_tree(trees):
    tree = trees["dgx-h100"]
    res = run_in(
        tree,
        "cat /proc/cmdline; echo @; ls /sys/bus/pci/devices; echo @; cat /proc/modules; echo @; "
        "cat /proc/driver/nvidia/version; echo @; . /etc/os-release; echo $ID $VERSION_ID; echo @; "
        "ls /lib/modules; echo @; cat /proc/1/comm; readlink -f /sbin/modprobe; "
        "cat /proc/self/status | grep -c '^Pid:'; echo @; uname -r; cat /proc/sys/kernel/osrelease; hostname; "
        "python3 -c 'import platform; print(platform.release())'",
    )
    assert res.returncode == 0, res.stderr
    cmdline, devs, mods, nvrm, osrel, libmods, rest, ident = res.stdout.split("@\n")
    assert cmdline.strip() == probe.cmdline(tree)
    assert devs.split() == sorted(p.name for p in (tree / "sys/bus/pci/devices").iterdir())
    assert mods == probe.read(tree, "/proc/modules")
    assert nvrm == probe.read(tree, "/proc/driver/nvidia/version")
    assert osrel.strip() == "ubuntu 22.04"
    assert libmods.split() == ["5.15.0-119-generic"]
    assert rest.split() == ["systemd", "/usr/sbin/modprobe", "1"]
    assert ident.split() == ["5.15.0-119-generic", "5.15.0-119-generic", "dgx-h100", "5.15.0-119-generic"]


def test_writes_land_in_the_tree_and_the_machine_is_untouched(fresh):
    tree = fresh("cpu-only")
    before = {p: os.path.lexists(p) for p in REAL_PATHS}
    assert not any(before.values())
    res = run_in(
        tree,
        "echo 'blacklist nouveau' > /etc/modprobe.d/gpuops-test.conf && "
        "mkdir /usr/lib/modules/gpuops-test && touch /run/gpuops-test /boot/gpuops-test && "
        "mkdir -p /var/lib /opt && touch /var/lib/gpuops-test /opt/gpuops-test && "
        "! echo 1 > /proc/sys/vm/drop_caches 2>/dev/null && ! touch /proc/new 2>/dev/null && "
        "echo 1 > /sys/bus/pci/devices/0000:11:00.0/d3cold_allowed",
    )
    assert res.returncode == 0, res.stderr
    assert {p: os.path.lexists(p) for p in REAL_PATHS} == before
    for p in REAL_PATHS:
        assert os.path.lexists(tree / p.lstrip("/")), p
    assert probe.read(tree, "/etc/modprobe.d/gpuops-test.conf") == "blacklist nouveau\n"
    assert not os.path.exists("/etc/modprobe.d/gpuops-test.conf")


def test_exit_status_and_signals(trees):
    tree = trees["cpu-only"]
    assert run_in(tree, "exit 7").returncode == 7
    assert run_in(tree, "kill -TERM $$").returncode == 128 + 15
    res = run_in(tree, "exec /nonexistent/tool")
    assert res.returncode == 127


def test_sriov_write_inside_the_namespace_gets_vfs(fresh):
    tree = fresh("pcie-l40s")
    pf = "/sys/bus/pci/devices/0000:14:00.0"
    res = run_in(
        tree,
        # the simulated kernel answers a write asynchronously: wait for it (up to 10 s, it can be slow under load)
        f"echo 4 > {pf}/sriov_numvfs; i=0; while [ ! -e {pf}/virtfn3 ] && [ $i -lt 500 ]; do "
        f"sleep 0.02; i=$((i+1)); done; ls -d {pf}/virtfn* | wc -l; readlink {pf}/virtfn0; "
        f'echo 2 > {pf}/sriov_numvfs; i=0; while [ "$(cat {pf}/sriov_numvfs)" != 4 ] && [ $i -lt 500 ]; do '
        f"sleep 0.02; i=$((i+1)); done; sleep 0.3; cat {pf}/sriov_numvfs; "
        "ls /sys/class/net | grep -c 'enp20s0f'",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["4", "../0000:14:00.1", "4", "4"]
    # the refusal of the second write is logged asynchronously too: wait for it (under load it can take seconds)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _logged(tree, "4 VFs already enabled. Disable before enabling 2 VFs"):
        time.sleep(0.05)
    assert _logged(tree, "4 VFs already enabled. Disable before enabling 2 VFs"), probe.kernel_log(tree)


def _logged(tree, text):
    return any(text in ln for ln in probe.kernel_log(tree))


def test_runner_refuses_bad_trees(tmp_path):
    from gpuops_lab.hostsim import runner

    with pytest.raises(SystemExit, match="not a simulated host tree"):
        runner.run(tmp_path, ["true"])
    with pytest.raises(SystemExit, match="must not live under /etc"):
        runner.check_tree(Path("/etc/x"))


def test_ansible_modules_run_against_the_simulated_host(tmp_path, hostsim_tmp):
    """The key integration: an inventory host whose python is the wrapper (ansible_connection local)."""
    from gpuops_lab.hostsim import create_host, destroy_host

    info = create_host("pcie-l40s", "h1", hostsim_tmp)
    tree = Path(info["tree"])
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps({"all": {"hosts": {"h1": info["hostvars"]}}}))
    out = tmp_path / "results.json"
    play = tmp_path / "play.yml"
    play.write_text(f"""
- hosts: h1
  gather_facts: false
  tasks:
    - ansible.builtin.slurp: {{src: /proc/cmdline}}
      register: cmdline
    - ansible.builtin.stat: {{path: /sys/bus/pci/devices/0000:14:00.0/sriov_totalvfs}}
      register: sriov
    - ansible.builtin.copy: {{dest: /etc/modprobe.d/x.conf, content: "y\\n"}}
    - ansible.builtin.command: modprobe -r nouveau
      register: rmmod
      failed_when: false  # expected to fail (nouveau in use): rc and stderr are asserted below
    - ansible.builtin.copy:  # /tmp is not overlaid: this lands on the machine, for the test to read
        dest: {out}
        content: "{{{{ {{'cmdline': cmdline.content | b64decode, 'sriov': sriov.stat.exists,
                     'rc': rmmod.rc, 'err': rmmod.stderr}} | to_json }}}}"
""")
    env = dict(
        os.environ,
        PYTHONPATH=str(HACK),
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_HOME=str(tmp_path / "ansible-home"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
    )
    exe = Path(__import__("sys").executable).parent / "ansible-playbook"
    res = subprocess.run(
        [str(exe), "-i", str(inv), str(play)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(out.read_text())
    assert got["cmdline"].strip() == probe.cmdline(tree)
    assert got["sriov"] is True
    assert (got["rc"], got["err"]) == (1, "modprobe: FATAL: Module nouveau is in use.")
    assert probe.read(tree, "/etc/modprobe.d/x.conf") == "y\n"
    assert not os.path.exists("/etc/modprobe.d/x.conf")
    assert destroy_host("h1", hostsim_tmp) and not tree.exists()

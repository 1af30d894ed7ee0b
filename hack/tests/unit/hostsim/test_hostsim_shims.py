"""The tool shims, called by their real names inside a host's namespace."""

from __future__ import annotations

import subprocess

from gpuops_lab import profiles
from gpuops_lab.hostsim import probe
from hostsim_util import run_in

REL = "5.15.0-119-generic"


def steps(tree, *cmds: str) -> list[tuple[int, str, str]]:
    """Run each command in one namespace; returns (rc, stdout, stderr) per command."""
    script = "".join(
        f"( {c} ) >/tmp/.o 2>/tmp/.e; echo \"@@$?\"; cat /tmp/.o; echo '@@OUT'; cat /tmp/.e; echo '@@END'\n"
        for c in cmds
    )
    res = run_in(tree, "set +e\n" + script)
    assert res.returncode == 0, res.stderr
    out = []
    for block in res.stdout.split("@@END\n")[:-1]:
        head, _nl, rest = block.partition("\n")
        so, _mark, se = rest.partition("@@OUT\n")
        out.append((int(head.lstrip("@")), so, se))
    assert len(out) == len(cmds), res.stdout
    return out


def test_nouveau_host_driver_install_path(fresh):
    tree = fresh("pcie-l40s")
    r = steps(
        tree,
        "modprobe -r nouveau",
        "modprobe nvidia",
        "apt-get install -y nvidia-dkms-570",
        f"apt-get install -y --no-install-recommends linux-headers-{REL}",
        "apt-get install -y nvidia-dkms-570",
        "dpkg-query -W -f='${Version}' nvidia-dkms-570",
        "modinfo -F version nvidia",
        "modprobe nvidia",
        "lsmod",
        "update-initramfs -u",
        "modprobe -r mlx5_ib",
        "apt-get install -y no-such-package",
    )
    assert r[0][0] == 1 and r[0][2].strip() == "modprobe: FATAL: Module nouveau is in use."
    assert r[1][0] == 1 and f"Module nvidia not found in directory /lib/modules/{REL}" in r[1][2]
    assert r[2][0] == 100 and "kernel headers" in r[2][2]
    assert r[3][0] == 0 and r[4][0] == 0
    assert (r[5][0], r[5][1]) == (0, "570.124.06-0ubuntu1")
    assert r[6][1].strip() == "570.124.06"
    assert r[7][0] == 1 and "could not insert 'nvidia': No such device" in r[7][2]  # nouveau owns the GPUs
    assert r[8][1].startswith("Module                  Size  Used by\n") and "nouveau " in r[8][1]
    assert r[9][0] == 0 and f"Generating /boot/initrd.img-{REL}" in r[9][1]
    assert r[10][0] == 0 and r[11][0] == 100
    mods = probe.modules(tree)
    assert "nouveau" in mods and "nvidia" not in mods and "mlx5_ib" not in mods
    assert probe.packages(tree)["nvidia-dkms-570"] == "570.124.06-0ubuntu1"
    calls = probe.calls(tree)
    assert [c["tool"] for c in calls].count("modprobe") == 4
    initramfs = probe.calls(tree, "update-initramfs")
    assert [(c["argv"], c["rc"]) for c in initramfs] == [(["update-initramfs", "-u"], 0)]


def test_fabricmanager_on_the_dgx(fresh):
    tree = fresh("dgx-h100")
    unit = "nvidia-fabricmanager.service"
    r = steps(
        tree,
        f"systemctl is-active {unit}",
        f"systemctl is-enabled {unit}",
        f"systemctl start {unit}",
        "apt-get install -y nvidia-fabricmanager-570",
        "systemctl daemon-reload",
        "systemctl enable --now nvidia-fabricmanager",
        f"systemctl is-active {unit}",
        f"systemctl show {unit} -p ActiveState,UnitFileState",
        "modprobe -r nvidia",
        "modprobe nvidia_peermem",
    )
    assert (r[0][0], r[0][1].strip()) == (3, "inactive")
    assert r[1][0] == 1 and "No such file or directory" in r[1][2]
    assert r[2][0] == 5 and f"Unit {unit} not found." in r[2][2]
    assert r[3][0] == 0 and r[4][0] == 0
    assert r[5][0] == 0 and f"multi-user.target.wants/{unit}" in r[5][2]
    assert (r[6][0], r[6][1].strip()) == (0, "active")
    assert r[7][1].split() == ["ActiveState=active", "UnitFileState=enabled"]
    assert r[8][0] == 1 and r[8][2].strip() == "modprobe: FATAL: Module nvidia is in use."
    assert r[9][0] == 0
    assert probe.unit_states(tree)[unit] == "active" and probe.unit_enabled(tree, unit)
    assert probe.modules(tree)["nvidia_peermem"]["used_by"] == []
    assert "nvidia_peermem" in probe.modules(tree)["ib_core"]["used_by"]


def test_fabricmanager_version_mismatch_fails_to_start(fresh):
    prof = profiles.load("dgx-h100")
    prof["host"]["apt_available"] = {"nvidia-fabricmanager-570": "570.86.15-1"}
    tree = fresh(prof)
    r = steps(
        tree,
        "apt-get install -y nvidia-fabricmanager-570",
        "systemctl start nvidia-fabricmanager",
        "systemctl is-active nvidia-fabricmanager",
        "systemctl is-failed nvidia-fabricmanager",
    )
    assert r[0][0] == 0
    assert r[1][0] == 1 and "failed because the control process exited with error code" in r[1][2]
    assert (r[2][0], r[2][1].strip()) == (3, "failed") and r[3][0] == 0
    assert any("does not match the NVIDIA driver version 570.124.06" in ln for ln in probe.kernel_log(tree))


def test_dracut_grub_and_secure_boot_tools(fresh):
    prof = profiles.load("cpu-only")
    prof["host"]["initramfs_tool"] = "dracut"
    tree = fresh(prof)
    r = steps(
        tree,
        "dracut",
        "dracut -f",
        "command -v update-initramfs",
        "sed -i 's/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX=\"intel_iommu=on iommu=pt\"/' /etc/default/grub",
        "update-grub",
        "mokutil --sb-state",
        "echo 'install nouveau /bin/false' > /etc/modprobe.d/no.conf; modprobe nouveau",
    )
    assert r[0][0] == 1 and "without --force" in r[0][2]
    assert r[1][0] == 0 and r[2][0] != 0
    assert r[4][0] == 0
    assert r[5][0] == 1 and "EFI variables are not supported" in r[5][2]
    assert r[6][0] == 1 and "Error running install command '/bin/false' for module nouveau" in r[6][2]
    assert "intel_iommu=on iommu=pt" in probe.read(tree, "/boot/grub/grub.cfg")
    assert probe.cmdline(tree).endswith("ro quiet")  # until the host reboots


def test_shims_refuse_to_run_outside_the_namespace(trees):
    tree = trees["cpu-only"]
    res = subprocess.run([str(tree / "usr/sbin/modprobe"), "-r", "ice"], capture_output=True, text=True, check=False)
    assert res.returncode == 126 and "outside that host's namespace" in res.stderr
    assert "ice" in probe.modules(tree)


def test_ofed_info_comes_and_goes_with_the_mofed_packages(fresh, trees):
    """MLNX_OFED installs /usr/bin/ofed_info (what gpu_host_facts reads with `ofed_info -s`); a host without the
    stack has none, and removing the stack removes it."""
    assert not (trees["pcie-l40s"] / "usr/bin/ofed_info").exists()  # inbox RDMA stack only
    tree = fresh("dgx-h100")
    r = steps(
        tree,
        "ofed_info -s",
        "ofed_info -n",
        "ofed_info",
        "ofed_info -x",
        "apt-get remove -y mlnx-ofed-kernel-dkms",
        "command -v ofed_info",
    )
    assert r[0] == (0, "MLNX_OFED_LINUX-24.10-1.1.4.0:\n", "")
    assert r[1] == (0, "24.10-1.1.4.0\n", "")
    assert r[2][1].splitlines() == ["MLNX_OFED_LINUX-24.10-1.1.4.0:", "", "mlnx-ofed-kernel-dkms: 24.10-1.1.4.0-1"]
    assert r[3][0] == 1 and "Usage" in r[3][2]
    assert r[4][0] == 0 and r[5][0] != 0


def test_ofed_info_of_doca_ofed(fresh):
    prof = profiles.load("dgx-h100")
    prof["host"]["ofed"] = {"kind": "doca", "version": "25.01-0.6.0"}
    ((rc, out, _err),) = steps(fresh(prof), "ofed_info -s")
    assert (rc, out) == (0, "OFED-internal-25.01-0.6.0:\n")


def test_nvidia_smi_lists_resets_an_idle_gpu_and_refuses_a_busy_one(fresh):
    """The remediation's GPU reset: the GPUs bound to nvidia (NVML's 8-digit PCI domain, stable UUIDs), the processes
    a test puts on a GPU, a reset logged, a busy GPU refused, a lost GPU not listed; no driver, no answer."""
    tree = fresh("dgx-h100")
    run = "/run/gpuops-sim"
    q = "nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader"
    r = steps(
        tree,
        q,
        q,
        f"mkdir -p {run}/gpu-processes && echo '4242, python' > {run}/gpu-processes/1",
        "nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader -i 1",
        "nvidia-smi -r -i 0",
        "nvidia-smi -r -i 1",
        f"cat {run}/gpu-resets.log",
        "nvidia-smi -r -i 99",
    )
    gpus = [line.split(", ") for line in r[0][1].splitlines()]
    assert r[0][0] == 0 and len(gpus) == 8 and r[0][1] == r[1][1]
    assert [g[0] for g in gpus] == [str(i) for i in range(8)]
    assert all(g[1].startswith("GPU-") and g[2].startswith("00000000:") for g in gpus)
    assert r[3][1].strip() == "4242, python"
    assert r[4][0] == 0 and f"GPU {gpus[0][2]} was successfully reset." in r[4][1]
    assert r[5][0] != 0 and "being used by some other process" in r[5][2]
    assert r[6][1].split() == [gpus[0][0], gpus[0][1], gpus[0][2]]
    assert r[7][0] != 0
    lost = gpus[2][2][4:].lower()
    r = steps(
        tree,
        f"mkdir -p {run}/gpu-lost && touch {run}/gpu-lost/{lost}",
        q,
        "modprobe -r nvidia_uvm nvidia_modeset nvidia",
        q,
    )
    assert len(r[1][1].splitlines()) == 7 and lost.upper() not in r[1][1].upper()
    assert r[3][0] == 9 and "couldn't communicate with the NVIDIA driver" in r[3][1]

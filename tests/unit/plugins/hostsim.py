"""Test helper: small host trees (sysfs/procfs/etc at real paths under a tmp root) and a scripted stand-in
for the command runner.

What hardware and the kernel do comes from the lab's host simulator (hack/gpuops_lab/hostsim), so that there
is one of each: PCI config-space images from ``pciconfig.build`` and SR-IOV from the simulated kernel
(``kernel.apply`` on a tree built by ``build_tree``, see ``lab_host``). This file only lays out the small
hand-made trees the table tests need and fakes the commands."""

from __future__ import annotations

import atexit
import errno
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ansible_collections.gpuops.platform.plugins.module_utils.common import _fs
from gpuops_lab.hostsim import build_tree, kernel, pciconfig
from gpuops_lab.hostsim.hostfs import Host

CLASS_BRIDGE = "060400"
# _pci.port_type() names → the lab's Spec.port_type
PORT_TYPES = {
    "endpoint": "endpoint",
    "root_port": "root_port",
    "upstream_port": "upstream",
    "downstream_port": "downstream",
}


def config_space(vendor, device, klass, port_type="endpoint", acs=None, sriov=None, size=4096):
    """The lab's config-space image (``pciconfig.build``) for hex-string IDs, cut to ``size`` bytes (an
    unprivileged read sees 64). ``acs``: the ACS Control value (None: no ACS capability); ``sriov``:
    (TotalVFs, NumVFs)."""
    spec = pciconfig.Spec(
        vendor=int(vendor, 16),
        device=int(device, 16),
        class_code=int(klass, 16),
        port_type=PORT_TYPES[port_type],
        acs_ctrl=acs,
        sriov=None
        if sriov is None
        else {"total": sriov[0], "num": sriov[1], "offset": 1, "stride": 1, "vf_device": 0x101E},
    )
    return pciconfig.build(spec)[:size]


class HostTree:
    """Lays out a host under ``root`` the way Linux shows it (relative sysfs links, binary config)."""

    def __init__(self, root):
        self.root = Path(root)
        self._real = {}  # pci address -> host path of its /sys/devices directory

    def p(self, host_path):
        return self.root / host_path.lstrip("/")

    def file(self, host_path, content="", mode=0o644):
        path = self.p(host_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        os.chmod(path, mode)
        return path

    def link(self, host_path, target):
        path = self.p(host_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.symlink_to(target)

    def rel_link(self, host_path, host_target):
        """A relative symlink, as sysfs uses."""
        rel = os.path.relpath(host_target, os.path.dirname(host_path))
        self.link(host_path, rel)

    def read(self, host_path):
        return self.p(host_path).read_text()

    # -- PCI ----------------------------------------------------------------------------------------
    def pci(
        self,
        address,
        vendor,
        device,
        klass,
        parent=None,
        driver=None,
        numa=0,
        iommu_group=None,
        port_type="endpoint",
        acs=None,
        sriov=None,
        config_size=4096,
        attrs=None,
    ):
        if parent:
            base = self._real[parent] + "/" + address
        else:
            domain, bus = address.split(":")[:2]
            base = f"/sys/devices/pci{domain}:{bus}/{address}"
        self._real[address] = base
        self.file(base + "/vendor", f"0x{vendor}\n")
        self.file(base + "/device", f"0x{device}\n")
        self.file(base + "/class", f"0x{klass}\n")
        self.file(base + "/numa_node", f"{numa}\n")
        self.file(base + "/config", config_space(vendor, device, klass, port_type, acs, sriov, config_size))
        for name, value in (attrs or {}).items():
            self.file(base + "/" + name, value)
        if sriov is not None:
            self.file(base + "/sriov_totalvfs", f"{sriov[0]}\n")
            self.file(base + "/sriov_numvfs", f"{sriov[1]}\n")
        if driver:
            self.p("/sys/bus/pci/drivers/" + driver).mkdir(parents=True, exist_ok=True)
            self.rel_link(base + "/driver", "/sys/bus/pci/drivers/" + driver)
        if iommu_group is not None:
            self.p(f"/sys/kernel/iommu_groups/{iommu_group}/devices").mkdir(parents=True, exist_ok=True)
            self.rel_link(base + "/iommu_group", f"/sys/kernel/iommu_groups/{iommu_group}")
        self.rel_link("/sys/bus/pci/devices/" + address, base)
        return base

    def bridge(self, address, parent=None, port_type="downstream_port", acs=0x001D, **kw):
        return self.pci(
            address, "10b5", "c010", CLASS_BRIDGE, parent=parent, driver="pcieport", port_type=port_type, acs=acs, **kw
        )

    def real(self, address):
        return self._real[address]

    def netdev(self, address, name):
        base = self._real[address]
        self.file(base + f"/net/{name}/type", "1\n")
        self.rel_link(base + f"/net/{name}/device", base)
        self.rel_link("/sys/class/net/" + name, base + "/net/" + name)

    def rdma(self, address, name, link_layer):
        base = self._real[address]
        self.file(base + f"/infiniband/{name}/ports/1/link_layer", link_layer + "\n")

    def add_vf(self, pf, index, vf_address):
        base = self.pci(vf_address, "15b3", "101e", "020000", parent=None, driver="mlx5_core")
        self.rel_link(base + "/physfn", self._real[pf])
        self.rel_link(self._real[pf] + f"/virtfn{index}", base)

    def acs_control(self, address):
        """Current ACS Control value in the config image (read by the lab's own capability walk)."""
        return pciconfig.acs_ctrl(self.p(self._real[address] + "/config").read_bytes())

    # -- kernel ---------------------------------------------------------------------------------------
    def modules(self, *lines):
        self.file("/proc/modules", "".join(line + "\n" for line in lines))

    def kernel(self, release="5.15.0-119-generic", headers=True, cmdline="BOOT_IMAGE=/vmlinuz ro quiet"):
        self.file("/proc/sys/kernel/osrelease", release + "\n")
        self.file("/proc/cmdline", cmdline + "\n")
        self.p(f"/lib/modules/{release}").mkdir(parents=True, exist_ok=True)
        hdr = f"/usr/src/linux-headers-{release}"
        self.link(f"/lib/modules/{release}/build", hdr)  # absolute, as Debian/Ubuntu ship it
        if headers:
            self.file(hdr + "/Makefile", "VERSION = 5\n")

    def snapshot(self):
        """{relative path: bytes or link target} of the whole tree, to prove that nothing was written."""
        snap = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in filenames + dirnames:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, self.root)
                if os.path.islink(full):
                    snap[rel] = "-> " + os.readlink(full)
                elif os.path.isfile(full):
                    with open(full, "rb") as f:
                        snap[rel] = f.read()
                else:
                    snap[rel] = "dir"
        return snap


def dgx_like(tree, gpus=8, switches=4, nics=8, acs_ctrl=0x001D):
    """A DGX-H100-shaped tree: per pair of GPUs one PCIe switch (root port → upstream → downstream ports) holding
    2 GPUs and 2 ConnectX-7 InfiniBand NICs; NVSwitches on their own root ports."""
    tree.kernel()
    addrs = {"gpus": [], "nics": [], "nvswitches": [], "bridges": []}
    for i in range(max(gpus, nics) // 2 if max(gpus, nics) else 0):
        bus = 0x10 + i * 0x10
        rp = "0000:00:%02x.0" % (i + 1)
        up = f"0000:{bus:02x}:00.0"
        tree.bridge(rp, port_type="root_port", acs=acs_ctrl)
        tree.bridge(up, parent=rp, port_type="upstream_port", acs=None)
        addrs["bridges"] += [rp, up]
        for j in range(2):
            dn = f"0000:{bus + 1:02x}:{j:02x}.0"
            tree.bridge(dn, parent=up, port_type="downstream_port", acs=acs_ctrl)
            addrs["bridges"].append(dn)
            ep_bus = bus + 2 + j * 2
            g = 2 * i + j
            if g < gpus:
                gpu = f"0000:{ep_bus:02x}:00.0"
                tree.pci(gpu, "10de", "2330", "030200", parent=dn, driver="nvidia", numa=i // 2, iommu_group=20 + g)
                addrs["gpus"].append(gpu)
            if g < nics:
                nic = "0000:%02x:00.0" % (ep_bus + 1)
                tree.pci(
                    nic,
                    "15b3",
                    "1021",
                    "020700",
                    parent=dn,
                    driver="mlx5_core",
                    numa=i // 2,
                    iommu_group=40 + g,
                    sriov=(16, 0),
                )
                tree.netdev(nic, f"ibp{ep_bus + 1}s0")
                tree.rdma(nic, f"mlx5_{g}", "InfiniBand")
                addrs["nics"].append(nic)
    for s in range(switches):
        rp = "0000:00:%02x.0" % (0x10 + s)
        sw = "0000:%02x:00.0" % (0xA0 + s)
        tree.bridge(rp, port_type="root_port", acs=acs_ctrl)
        tree.pci(sw, "10de", "22a3", "068000", parent=rp, driver="nvidia", iommu_group=60 + s)
        addrs["nvswitches"].append(sw)
    return addrs


class FakeCommands:
    """Stands in for Runner._resolve/_exec. ``tools``: binaries that exist. ``handlers``: list of
    (regex over 'tool arg arg', result) where result is (rc, out, err) or a callable(argv) -> (rc, out, err)."""

    MUTATING = re.compile(
        r"^(modprobe -r|update-initramfs|dracut|apt-get|dnf|systemctl (enable|start|restart|daemon-reload)|setpci)\b"
    )

    def __init__(self, tools=(), handlers=()):
        self.tools = set(tools)
        self.handlers = list(handlers)
        self.calls = []
        self.stdin = []  # what each call got on its standard input (None: nothing), in the order of calls

    def on(self, pattern, result):
        self.handlers.insert(0, (pattern, result))

    def resolve(self, tool):
        return "/usr/bin/" + tool if tool in self.tools else None

    def execute(self, argv, env, data=None):
        assert env.get("LC_ALL") == "C" and env.get("LANG") == "C", env
        line = " ".join([os.path.basename(argv[0])] + list(argv[1:]))
        self.calls.append(line)
        self.stdin.append(data)
        for pattern, result in self.handlers:
            if re.search(pattern, line):
                return result(argv) if callable(result) else result
        return (0, "", "")

    def mutations(self):
        return [c for c in self.calls if self.MUTATING.search(c)]


class LabKernel:
    """The lab's simulated kernel behind HostFS.write_attr, for a tree built by ``build_tree``: the write lands
    in the tree, then ``kernel.apply`` does what Linux does (creates or removes the VFs and their netdevs). What
    the kernel refuses (apply undoes the write and logs it) is raised as the error write(2) would return.

    ``create_vfs = False`` plays a PF driver that accepts a count and never creates the VFs (it still removes
    them)."""

    ERRNO = {"EBUSY": errno.EBUSY, "ERANGE": errno.ERANGE, "ENOENT": errno.ENOENT, "EINVAL": errno.EINVAL}

    def __init__(self, tree):
        self.host = Host(tree)
        self.create_vfs = True
        self.writes = []

    def write_attr(self, fs, path, value):
        with open(fs.path(path), "w") as f:
            f.write(value)
        if not path.endswith("/sriov_numvfs"):
            return
        pf = path.split("/")[-2]
        self.writes.append((pf, int(value)))
        if not self.create_vfs and int(value) > 0:
            return
        for event in kernel.apply(self.host):
            m = re.search(r"-E([A-Z]+)", event)
            if event.startswith(pf + ": ") and m:
                code = self.ERRNO.get("E" + m.group(1), errno.EIO)
                raise OSError(code, event.split(": ", 1)[1], fs.path(path))


_PRISTINE = {}
_BASE = []


def _base():
    """One directory for this process's lab trees, on tmpfs when the machine has one (a tree is about a
    thousand small files), removed at exit."""
    if not _BASE:
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _BASE.append(Path(tempfile.mkdtemp(prefix="gpuops-unit-hostsim-", dir=shm)))
        atexit.register(shutil.rmtree, _BASE[0], True)
    return _BASE[0]


def lab_host(profile, monkeypatch):
    """A host tree built by the lab from a hardware profile (tests/fixtures/hardware), module_utils' ROOT
    pointed at it and its kernel behind sysfs writes: returns (HostTree, LabKernel). The profile is built once
    per process and copied for each test (relative links, so the copy is a host of its own)."""
    if profile not in _PRISTINE:
        _PRISTINE[profile] = build_tree(profile, _base() / profile)["tree"]
    tree = tempfile.mkdtemp(prefix=profile + "-", dir=_base())
    os.rmdir(tree)
    subprocess.run(["cp", "-a", _PRISTINE[profile], tree], check=True)  # much faster than shutil.copytree
    monkeypatch.setattr(_fs, "ROOT", str(tree))
    sim = LabKernel(tree)

    def write_attr(fs, path, value):  # a plain function, so that HostFS passes itself as fs
        sim.write_attr(fs, path, value)

    monkeypatch.setattr(_fs.HostFS, "write_attr", write_attr)
    return HostTree(tree), sim

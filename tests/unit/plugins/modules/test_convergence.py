"""Fault injection for every mutating module: each step fails in turn (a write error, a failing command, a
command killed or timing out), the failing run must say so and report ``changed: true`` when it had already
changed something, and a rerun with the fault removed must finish the job (and a third run change nothing).

The final state is read back independently of the module's result: files in the host tree and the state
kept by the fake commands (what the initramfs was built from, the unit systemd loaded, the package the
running service came from)."""

from __future__ import annotations

import errno

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common import _fs
from ansible_collections.gpuops.platform.plugins.module_utils.host import _acs, _nouveau, _sriov
from ansible_collections.gpuops.platform.plugins.modules import fabricmanager, nouveau_blacklist, pcie_acs, sriov_vfs
from hostsim import dgx_like, lab_host

# -- faults ------------------------------------------------------------------------------------------


def fail_write(monkeypatch, method, suffix, err=errno.EACCES, after=0):
    """HostFS.<method> raises OSError(err) for host paths ending in ``suffix`` (after ``after`` good calls)."""
    original = getattr(_fs.HostFS, method)
    seen = {"n": 0}

    def faulty(self, p, *args):
        if p.endswith(suffix):
            seen["n"] += 1
            if seen["n"] > after:
                raise OSError(err, f"{errno.errorcode[err]} (injected)", self.path(p))
        return original(self, p, *args)

    monkeypatch.setattr(_fs.HostFS, method, faulty)


def fail_command(commands, pattern, rc=1, err="injected failure\n"):
    commands.on(pattern, (rc, "", err))


@pytest.fixture
def converge(run_module, commands, monkeypatch):
    """converge(module, args, inject, tree, changed, match, failed=True): run with the fault ``inject(m)`` (m: a
    monkeypatch context), then check mode without it (predicts the rest of the job and changes nothing), then
    for real (finishes it: changed), then once more (no change). Returns the four results."""

    def _converge(module, args, inject, tree, expect_changed, match, expect_failed=True):
        handlers = list(commands.handlers)
        with monkeypatch.context() as m:
            inject(m)
            first, failed = run_module(module, args)
        commands.handlers[:] = handlers
        assert failed is expect_failed, first
        assert first.get("changed", False) is expect_changed, first
        text = first.get("msg", "") + str(first.get("warnings", ""))
        assert match in text, text
        snap, calls = tree.snapshot(), len(commands.calls)
        check, failed = run_module(module, args, check_mode=True)
        assert not failed and check["changed"] is True, check
        assert tree.snapshot() == snap, "check mode wrote to the host"
        assert not [c for c in commands.calls[calls:] if commands.MUTATING.search(c)], "check mode ran a change"
        second, failed = run_module(module, args)
        assert not failed and second["changed"] is True, second
        third, failed = run_module(module, args)
        assert not failed and third["changed"] is False, third
        return first, check, second, third

    return _converge


# -- nouveau_blacklist -------------------------------------------------------------------------------

CONF = _nouveau.CONF_PATH


@pytest.fixture
def nouveau_host(host, commands):
    """A Debian host with an unused nouveau loaded; update-initramfs records the blacklist it bakes in."""
    host.kernel()
    host.modules("nouveau 2433024 0 - Live 0x0", "ttm 1 0 - Live 0x0")
    commands.tools |= {"modprobe", "update-initramfs"}
    host.initrd = None

    def update_initramfs(argv):
        host.initrd = host.read(CONF) if host.p(CONF).exists() else ""
        return (0, "", "")

    def unload(argv):
        host.modules("ttm 1 0 - Live 0x0")
        return (0, "", "")

    commands.on(r"^update-initramfs -u -k all$", update_initramfs)
    commands.on(r"^modprobe -r nouveau$", unload)
    return host


NOUVEAU_FAULTS = {
    "write blacklist": (lambda m, c: fail_write(m, "write_file", CONF), False, CONF),
    "initramfs fails": (
        lambda m, c: fail_command(c, r"^update-initramfs", 1, "E: mkinitramfs failure cpio 141\n"),
        True,
        "update-initramfs -u -k all",
    ),
    "initramfs killed": (lambda m, c: fail_command(c, r"^update-initramfs", -9, ""), True, "update-initramfs"),
}


@pytest.mark.parametrize("step", NOUVEAU_FAULTS)
def test_nouveau_blacklist_converges(nouveau_host, commands, converge, step):
    inject, changed, match = NOUVEAU_FAULTS[step]
    _first, check, _second, _third = converge(
        nouveau_blacklist, {"state": "present"}, lambda m: inject(m, commands), nouveau_host, changed, match
    )
    assert "update-initramfs -u -k all" in check["actions"]
    assert nouveau_host.read(CONF) == _nouveau.CONTENT
    assert nouveau_host.initrd == _nouveau.CONTENT, "the initramfs does not carry the blacklist"
    assert "nouveau" not in nouveau_host.read("/proc/modules")


def test_nouveau_unload_failure_is_retried(nouveau_host, commands, converge):
    first, check, second, _third = converge(
        nouveau_blacklist,
        {},
        lambda m: fail_command(commands, r"^modprobe -r nouveau$", 1, "modprobe: FATAL: Module nouveau is in use.\n"),
        nouveau_host,
        True,
        "Module nouveau is in use",
        expect_failed=False,
    )
    assert first["reboot_required"] and not second["reboot_required"]
    assert check["actions"] == second["actions"] == ["modprobe -r nouveau"]
    assert "nouveau" not in nouveau_host.read("/proc/modules")


def test_nouveau_absent_regenerates_after_failure(nouveau_host, commands, converge):
    nouveau_host.modules()
    nouveau_host.file(CONF, _nouveau.CONTENT)
    nouveau_host.initrd = _nouveau.CONTENT

    def inject(m):
        fail_command(commands, r"^update-initramfs", 1)

    converge(nouveau_blacklist, {"state": "absent"}, inject, nouveau_host, True, "update-initramfs")
    assert not nouveau_host.p(CONF).exists() and nouveau_host.initrd == ""


# -- sriov_vfs ---------------------------------------------------------------------------------------

# The lab's pcie-l40s profile: ConnectX-6 Dx ports with sriov_totalvfs 8; the lab's kernel creates the VFs.
PF, PF_NETDEV = "0000:14:00.0", "enp20s0np0"
PF_DIR = f"/sys/bus/pci/devices/{PF}"


@pytest.fixture
def lab(monkeypatch):
    return lab_host("pcie-l40s", monkeypatch)


def no_vfs(m, kernel):
    """The kernel accepts the count but the VFs never appear (PF driver stuck): the wait times out."""
    m.setattr(kernel, "create_vfs", False)


SRIOV_FAULTS = {
    "write numvfs": (0, lambda m, k: fail_write(m, "write_attr", "/sriov_numvfs", errno.ENOMEM), False, "sriov_numvfs"),
    "write numvfs after 0": (
        2,
        lambda m, k: fail_write(m, "write_attr", "/sriov_numvfs", errno.ENOMEM, after=1),
        True,
        "writing 4 to",
    ),
    "vfs time out": (0, no_vfs, True, "0 VF devices after 0s, 4 expected"),
    "vfs time out through 0": (2, no_vfs, True, "0 VF devices after 0s, 4 expected"),
    "write udev rule": (0, lambda m, k: fail_write(m, "write_file", _sriov.RULES_PATH), True, _sriov.RULES_PATH),
}


@pytest.mark.parametrize("step", SRIOV_FAULTS)
def test_sriov_vfs_converges(lab, converge, step):
    tree, kernel = lab
    before, inject, changed, match = SRIOV_FAULTS[step]
    if before:
        kernel.write_attr(_fs.HostFS(), f"{PF_DIR}/sriov_numvfs", str(before))
    args = {"pf": PF_NETDEV, "num_vfs": 4, "persist": True, "timeout": 0}
    _first, check, second, third = converge(sriov_vfs, args, lambda m: inject(m, kernel), tree, changed, match)
    assert check["writes"] == second["writes"] == ([] if step == "write udev rule" else second["writes"][:-1] + [4])
    if step.startswith("vfs time out"):  # the count is right, the devices are not: the diff says which
        assert "sriov_numvfs: 4\nvf_devices: 0\n" == check["diff"][0]["before"]
    assert tree.read(f"{PF_DIR}/sriov_numvfs").strip() == "4"
    assert [tree.p(f"{PF_DIR}/virtfn{i}").exists() for i in range(5)] == [True] * 4 + [False]
    assert len(second["vfs"]) == len(third["vfs"]) == 4
    assert all(tree.p(f"/sys/class/net/{v['netdevs'][0]}").exists() for v in third["vfs"])
    assert _sriov.RULE % (PF, 4) in tree.read(_sriov.RULES_PATH)


def test_sriov_vfs_negative_timeout_is_rejected_before_any_write(lab, run_module):
    tree, kernel = lab
    snap = tree.snapshot()
    result, failed = run_module(sriov_vfs, {"pf": PF, "num_vfs": 2, "timeout": -1})
    assert failed and "timeout must be 0 or more" in result["msg"]
    assert tree.snapshot() == snap and kernel.writes == []


# -- pcie_acs ----------------------------------------------------------------------------------------


class FakeSystemd:
    """systemctl behind the fake commands: unit files are read at daemon-reload (``loaded``), enable
    records the unit, start/restart records the package version the service runs."""

    def __init__(self, host, commands, unit, package=None):
        self.host, self.unit, self.pkgs = host, unit, package
        self.loaded = None
        self.enabled = False
        self.active = False
        self.running = None
        host.p("/run/systemd/system").mkdir(parents=True, exist_ok=True)  # running as PID 1 (sd_booted)
        commands.tools |= {"systemctl"}
        commands.on(r"^systemctl daemon-reload$", self.daemon_reload)
        commands.on(
            rf"^systemctl is-enabled {unit}$", lambda a: (0, "enabled\n", "") if self.enabled else (1, "disabled\n", "")
        )
        commands.on(
            rf"^systemctl is-active {unit}$", lambda a: (0, "active\n", "") if self.active else (3, "inactive\n", "")
        )
        commands.on(rf"^systemctl enable {unit}$", self.enable)
        commands.on(rf"^systemctl (start|restart) {unit}$", self.start)

    def daemon_reload(self, argv):
        path = "/etc/systemd/system/" + self.unit
        self.loaded = self.host.read(path) if self.host.p(path).exists() else None
        return (0, "", "")

    def enable(self, argv):
        self.enabled = True
        return (0, "", "")

    def start(self, argv):
        self.active = True
        self.running = dict(self.pkgs) if self.pkgs is not None else None
        return (0, "", "")


@pytest.fixture
def acs_host(host, commands):
    addrs = dgx_like(host)
    commands.tools |= {"setpci"}
    return addrs, FakeSystemd(host, commands, _acs.UNIT_NAME)


ACS_FAULTS = {
    "write register": (lambda m, c: fail_write(m, "pwrite", "0000:11:01.0/config", errno.EIO), True, "0000:11:01.0"),
    "write unit": (lambda m, c: fail_write(m, "write_file", _acs.UNIT_PATH), True, _acs.UNIT_PATH),
    "daemon-reload fails": (lambda m, c: fail_command(c, r"^systemctl daemon-reload$"), True, "daemon-reload"),
    "daemon-reload times out": (
        lambda m, c: fail_command(
            c, r"^systemctl daemon-reload$", 1, "Failed to reload daemon: Connection timed out\n"
        ),
        True,
        "Connection timed out",
    ),
    "enable": (lambda m, c: fail_command(c, r"^systemctl enable"), True, "systemctl enable gpuops-pcie-acs.service"),
}


@pytest.mark.parametrize("step", ACS_FAULTS)
def test_pcie_acs_converges(host, acs_host, commands, converge, step):
    _addrs, systemd = acs_host
    inject, changed, match = ACS_FAULTS[step]
    _first, check, second, _third = converge(
        pcie_acs, {"persist": True}, lambda m: inject(m, commands), host, changed, match
    )
    assert check["devices"] == second["devices"] and check["unit"] == second["unit"]
    targets = _acs.default_targets(_fs.HostFS())
    assert len(targets) == 12 and all(host.acs_control(a) == 0 for a in targets)
    assert systemd.loaded == host.read(_acs.UNIT_PATH), "systemd runs an old copy of the unit"
    assert systemd.enabled


# -- fabricmanager -----------------------------------------------------------------------------------

FM = "nvidia-fabricmanager.service"
NV_VERSION = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Release Build  (dvs-builder@U16-I3-B03-4-3)\n"


@pytest.fixture
def fm_host(host, commands):
    host.kernel()
    host.modules("nvidia 1 10 - Live 0x0")
    host.file("/proc/driver/nvidia/version", NV_VERSION)
    host.bridge("0000:00:10.0", port_type="root_port")
    host.pci("0000:a0:00.0", "10de", "22a3", "068000", parent="0000:00:10.0", driver="nvidia")
    pkgs = {}
    commands.tools |= {"modinfo", "dpkg-query", "apt-get"}
    commands.on(r"^modinfo -F version nvidia$", (0, "570.124.06\n", ""))

    def dpkg_query(argv):
        name = argv[-1]
        if name not in pkgs:
            return (1, "", f"dpkg-query: no packages found matching {name}\n")
        return (0, f"{name}\t{pkgs[name]}\tinstalled\n", "")

    def install(argv):
        name, _sep, version = argv[-1].partition("=")
        pkgs[name] = version
        return (0, "", "")

    commands.on(r"^dpkg-query -W", dpkg_query)
    commands.on(r"^apt-get install", install)
    return pkgs, FakeSystemd(host, commands, FM, package=pkgs)


FM_FAULTS = {
    "install fails": (
        False,
        lambda m, c: fail_command(c, r"^apt-get install", 100, "E: Could not get lock\n"),
        False,
        "apt-get",
    ),
    "install killed": (False, lambda m, c: fail_command(c, r"^apt-get install", -15, ""), False, "apt-get"),
    "enable": (False, lambda m, c: fail_command(c, r"^systemctl enable"), True, f"systemctl enable {FM}"),
    "start": (False, lambda m, c: fail_command(c, r"^systemctl start"), True, f"systemctl start {FM}"),
    "restart after upgrade": (
        True,
        lambda m, c: fail_command(c, r"^systemctl restart"),
        True,
        f"systemctl restart {FM}",
    ),
}


@pytest.mark.parametrize("step", FM_FAULTS)
def test_fabricmanager_converges(host, fm_host, commands, converge, step):
    pkgs, systemd = fm_host
    upgrade, inject, changed, match = FM_FAULTS[step]
    if upgrade:
        pkgs["nvidia-fabricmanager-570"] = "570.86.15-1"
        systemd.enabled = systemd.active = True
        systemd.running = dict(pkgs)
    _first, check, second, _third = converge(fabricmanager, {}, lambda m: inject(m, commands), host, changed, match)
    assert check["actions"] == second["actions"]
    assert pkgs == {"nvidia-fabricmanager-570": "570.124.06-1"}
    assert systemd.enabled and systemd.active
    assert systemd.running == pkgs, "the service still runs the old package"

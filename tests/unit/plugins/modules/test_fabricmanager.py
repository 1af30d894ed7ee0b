from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.modules import fabricmanager

NV_VERSION = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Release Build  (dvs-builder@U16-I3-B03-4-3)\n"


class Host:
    """Package and service state behind fake dpkg-query/apt-get/rpm/dnf/systemctl."""

    def __init__(self, commands, mgr="apt", installed=None, enabled=False, active=False, modinfo="570.124.06"):
        self.pkgs = dict(installed or {})
        self.svc = {"enabled": enabled, "active": active}
        commands.tools |= {"systemctl", "modinfo"} | ({"dpkg-query", "apt-get"} if mgr == "apt" else {"rpm", "dnf"})
        commands.on(
            r"^modinfo -F version nvidia$",
            (0, modinfo + "\n", "") if modinfo else (1, "", "modinfo: ERROR: Module nvidia not found.\n"),
        )
        commands.on(r"^dpkg-query -W", self.dpkg_query)
        commands.on(r"^rpm -q", self.rpm_q)
        commands.on(r"^apt-get install", self.install)
        commands.on(r"^dnf install", self.install)
        commands.on(
            r"^systemctl is-enabled nvidia-fabricmanager.service$",
            lambda a: (0, "enabled\n", "") if self.svc["enabled"] else (1, "disabled\n", ""),
        )
        commands.on(
            r"^systemctl is-active nvidia-fabricmanager.service$",
            lambda a: (0, "active\n", "") if self.svc["active"] else (3, "inactive\n", ""),
        )
        commands.on(r"^systemctl enable nvidia-fabricmanager.service$", lambda a: self._set("enabled"))
        commands.on(r"^systemctl (start|restart) nvidia-fabricmanager.service$", lambda a: self._set("active"))

    def _set(self, key):
        self.svc[key] = True
        return (0, "", "")

    def dpkg_query(self, argv):
        name = argv[-1]
        if name not in self.pkgs:
            return (1, "", f"dpkg-query: no packages found matching {name}\n")
        return (0, f"{name}\t{self.pkgs[name]}\tinstalled\n", "")

    def rpm_q(self, argv):
        name = argv[-1]
        if name not in self.pkgs:
            return (1, f"package {name} is not installed\n", "")
        return (0, f"{name}\t{self.pkgs[name]}\n", "")

    def install(self, argv):
        spec = argv[-1]
        if "=" in spec:  # apt: name=version
            name, _sep, version = spec.partition("=")
        else:  # dnf: name-version-release
            name, version = "nvidia-fabric-manager", spec[len("nvidia-fabric-manager-") :]
        self.pkgs[name] = version
        return (0, "", "")


@pytest.fixture
def nvswitch_host(host):
    host.kernel()
    host.modules("nvidia 1 10 - Live 0x0")
    host.file("/proc/driver/nvidia/version", NV_VERSION)
    host.bridge("0000:00:10.0", port_type="root_port")
    host.pci("0000:a0:00.0", "10de", "22a3", "068000", parent="0000:00:10.0", driver="nvidia")
    return host


def test_installs_matching_package_and_starts_service(nvswitch_host, commands, four_step):
    state = Host(commands)
    results = four_step(fabricmanager, {})
    check, real = results[0], results[1]
    expected = [
        "install nvidia-fabricmanager-570 570.124.06-1",
        "enable nvidia-fabricmanager.service",
        "start nvidia-fabricmanager.service",
    ]
    assert check["actions"] == real["actions"] == expected
    assert state.pkgs == {"nvidia-fabricmanager-570": "570.124.06-1"} and state.svc == {"enabled": True, "active": True}
    assert (
        "apt-get install -y -q --no-install-recommends --allow-downgrades nvidia-fabricmanager-570=570.124.06-1"
        in commands.calls
    )
    assert real["nvswitches"] == ["0000:a0:00.0"] and real["driver_version"] == "570.124.06"
    assert check["diff"]["before"].startswith("package: null\n")


def test_mismatched_version_is_replaced_and_restarted(nvswitch_host, commands, four_step):
    state = Host(commands, installed={"nvidia-fabricmanager-570": "570.86.15-1"}, enabled=True, active=True)
    results = four_step(fabricmanager, {})
    assert results[1]["actions"] == [
        "install nvidia-fabricmanager-570 570.124.06-1",
        "restart nvidia-fabricmanager.service",
    ]
    assert results[1]["version_before"] == "570.86.15-1" and state.pkgs["nvidia-fabricmanager-570"] == "570.124.06-1"


def test_distribution_build_of_same_version_is_kept(nvswitch_host, commands, run_module):
    Host(commands, installed={"nvidia-fabricmanager-570": "570.124.06-0ubuntu0.22.04.1"}, enabled=True, active=True)
    result, failed = run_module(fabricmanager, {})
    assert not failed and not result["changed"]


def test_rhel_naming(nvswitch_host, commands, four_step):
    state = Host(commands, mgr="dnf")
    four_step(fabricmanager, {})
    assert "dnf install -y --allowerasing nvidia-fabric-manager-570.124.06-1" in commands.calls
    assert state.pkgs == {"nvidia-fabric-manager": "570.124.06-1"}


def test_no_nvswitch_no_change(host, commands, run_module):
    host.kernel()
    host.pci("0000:1b:00.0", "10de", "2330", "030200")
    result, failed = run_module(fabricmanager, {})
    assert not failed and not result["changed"] and "no NVSwitch" in result["msg"]
    assert commands.calls == []


@pytest.mark.parametrize("check_mode", [True, False])
def test_no_driver_is_an_error(host, commands, run_module, check_mode):
    host.kernel()
    host.modules()
    host.pci("0000:a0:00.0", "10de", "22a3", "068000")
    Host(commands, modinfo=None)
    result, failed = run_module(fabricmanager, {}, check_mode=check_mode)
    assert failed and "no NVIDIA driver" in result["msg"] and "5.15.0-119-generic" in result["msg"]
    assert commands.mutations() == []


def test_loaded_and_installed_driver_differ(nvswitch_host, commands, run_module):
    Host(commands, modinfo="570.133.20")
    result, failed = run_module(fabricmanager, {})
    assert failed and "570.124.06 is loaded but 570.133.20 is installed" in result["msg"]
    assert commands.mutations() == []


@pytest.mark.parametrize("check_mode", [True, False])
def test_no_modinfo_says_so(host, commands, run_module, check_mode):
    host.kernel()
    host.modules()
    host.pci("0000:a0:00.0", "10de", "22a3", "068000")
    Host(commands)
    commands.tools.discard("modinfo")
    result, failed = run_module(fabricmanager, {}, check_mode=check_mode)
    assert failed and "modinfo is not installed" in result["msg"] and "install kmod" in result["msg"]
    assert "finds no nvidia module" not in result["msg"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_unanswered_systemctl_is_not_taken_for_inactive(nvswitch_host, commands, run_module, check_mode):
    Host(commands, installed={"nvidia-fabricmanager-570": "570.124.06-1"})
    no_bus = (1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.\n")
    commands.on(r"^systemctl is-(active|enabled) ", no_bus)
    result, failed = run_module(fabricmanager, {}, check_mode=check_mode)
    assert failed and "cannot read the state of nvidia-fabricmanager.service" in result["msg"]
    assert "has not been booted with systemd" in result["msg"]
    assert commands.mutations() == [] and result["changed"] is False


# Issue 27: package_name and package_revision went to apt-get unchecked (-oAPT::Get::Simulate=true made apt
# "succeed" installing nothing). A value that is no Debian/RPM name or revision is refused naming its option: one that
# neither manager takes before anything runs, one the host's manager does not take before any package command.
PKG_COMMANDS = ("dpkg-query", "apt-get", "rpm", "dnf")


@pytest.mark.parametrize(
    "mgr, args, option, nothing_run",
    [
        ("apt", {"package_name": "-oAPT::Get::Simulate=true"}, "package_name", True),
        ("apt", {"package_name": "--simulate"}, "package_name", True),
        ("apt", {"package_name": "nvidia-fabricmanager-570=570.86.15-1"}, "package_name", True),
        ("apt", {"package_name": "nvidia-fabricmanager/jammy"}, "package_name", True),
        ("apt", {"package_name": "nvidia-fabricmanager-570 vim"}, "package_name", True),
        ("apt", {"package_name": "nvidia-fabricmanager*"}, "package_name", True),
        ("apt", {"package_name": ""}, "package_name", True),
        ("apt", {"package_name": "x" * 256}, "package_name", True),
        ("apt", {"package_name": "Nvidia-FabricManager"}, "package_name", False),  # an RPM name, not a Debian one
        ("apt", {"package_name": "n"}, "package_name", False),  # Debian: 2 characters at least
        ("apt", {"package_name": "nvidia_fabricmanager"}, "package_name", False),
        ("apt", {"package_revision": "-oAPT::Get::Simulate=true"}, "package_revision", True),
        ("apt", {"package_revision": "1 --simulate"}, "package_revision", True),
        ("apt", {"package_revision": "1-2"}, "package_revision", True),
        ("apt", {"package_revision": ""}, "package_revision", True),
        ("apt", {"package_revision": "1.el9_3"}, "package_revision", False),  # an RPM release, not a Debian revision
        ("dnf", {"package_name": "-y"}, "package_name", True),
        ("dnf", {"package_name": "nvidia-fabric-manager[1]"}, "package_name", True),
        ("dnf", {"package_revision": "1~rc1:x"}, "package_revision", True),
        ("dnf", {"package_revision": "0ubuntu1.2+x~y:z"}, "package_revision", True),
    ],
)
def test_bad_package_options_are_refused_naming_the_option(
    nvswitch_host, commands, run_module, mgr, args, option, nothing_run
):
    Host(commands, mgr=mgr)
    snap = nvswitch_host.snapshot()
    result, failed = run_module(fabricmanager, args)
    assert failed and result["msg"].startswith(f"{option}: "), result["msg"]
    assert "is not a valid package" in result["msg"] and result["changed"] is False
    ran = [c.split()[0] for c in commands.calls]
    assert not set(ran) & set(PKG_COMMANDS), commands.calls  # no package command saw it
    if nothing_run:
        assert commands.calls == []
    assert nvswitch_host.snapshot() == snap and commands.mutations() == []


@pytest.mark.parametrize(
    "mgr, args, spec",
    [
        (
            "apt",
            {"package_name": "nvidia-fabricmanager-570", "package_revision": "0ubuntu1~22.04.1"},
            "nvidia-fabricmanager-570=570.124.06-0ubuntu1~22.04.1",
        ),
        ("apt", {"package_name": "nvidia-fabricmanager"}, "nvidia-fabricmanager=570.124.06-1"),
        ("dnf", {"package_revision": "1.el9_3"}, "nvidia-fabric-manager-570.124.06-1.el9_3"),
        (
            "dnf",
            {"package_name": "nvidia-fabric-manager", "package_revision": "1"},
            "nvidia-fabric-manager-570.124.06-1",
        ),
    ],
)
def test_valid_package_options_reach_the_package_manager(nvswitch_host, commands, run_module, mgr, args, spec):
    Host(commands, mgr=mgr)
    result, failed = run_module(fabricmanager, args)
    assert not failed, result["msg"]
    (install,) = [c for c in commands.calls if c.startswith(("apt-get install", "dnf install"))]
    assert install.endswith(" " + spec)

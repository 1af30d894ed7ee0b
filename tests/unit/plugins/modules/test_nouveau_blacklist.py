from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.host import _nouveau
from ansible_collections.gpuops.platform.plugins.modules import nouveau_blacklist

CONF = "/etc/modprobe.d/blacklist-nouveau.conf"


@pytest.fixture
def debian(host, commands):
    host.kernel()
    commands.tools |= {"modprobe", "update-initramfs"}

    def unload(argv):
        host.modules("ttm 1 0 - Live 0x0")
        return (0, "", "")

    commands.on(r"^modprobe -r nouveau$", unload)
    return host


def test_blacklists_regenerates_and_unloads(debian, commands, four_step):
    debian.modules("nouveau 2433024 0 drm_ttm_helper,ttm, Live 0x0000000000000000", "ttm 1 1 - Live 0x0")
    results = four_step(nouveau_blacklist, {"state": "present"})
    first, real = results[0], results[1]
    assert first["changed"] and first["reboot_required"] is False
    assert first["actions"] == real["actions"] == ["write " + CONF, "update-initramfs -u -k all", "modprobe -r nouveau"]
    assert debian.read(CONF) == _nouveau.CONTENT
    assert debian.p(CONF).stat().st_mode & 0o777 == 0o644
    assert [p.name for p in debian.p("/etc/modprobe.d").iterdir()] == ["blacklist-nouveau.conf"]  # no temp files left
    assert commands.mutations() == ["update-initramfs -u -k all", "modprobe -r nouveau"]
    file_diff, module_diff = first["diff"]
    assert file_diff["before"] == "" and file_diff["after"] == _nouveau.CONTENT
    assert module_diff["before"] == "nouveau_loaded: True\n" and module_diff["after"] == "nouveau_loaded: False\n"


@pytest.mark.parametrize(
    "line",
    [
        "nouveau 2433024 1 drm_ttm_helper,ttm, Live 0x0",
        # a kernel without module unloading prints no count ("- -", tests/fixtures/real-hosts/h100-vm): only a reboot
        "nouveau 2433024 - - Live 0x0",
    ],
)
def test_in_use_is_never_unloaded(debian, commands, four_step, line):
    debian.modules(line)
    results = four_step(nouveau_blacklist, {"state": "present"})
    assert [r["reboot_required"] for r in results] == [True] * 4
    assert "modprobe -r nouveau" not in commands.calls


def test_already_blacklisted_and_unloaded_touches_nothing(debian, commands, run_module):
    debian.modules()
    debian.file(CONF, _nouveau.CONTENT)
    result, failed = run_module(nouveau_blacklist, {})
    assert not failed and not result["changed"] and result["actions"] == []
    assert commands.calls == []


def test_dracut_host(host, commands, four_step):
    host.kernel()
    host.modules()
    commands.tools |= {"modprobe", "dracut"}
    results = four_step(nouveau_blacklist, {"state": "present"})
    assert results[1]["actions"] == ["write " + CONF, "dracut --force --regenerate-all"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_absent_removes_and_asks_for_reboot(debian, commands, run_module, check_mode):
    debian.modules()
    debian.file(CONF, _nouveau.CONTENT)
    result, failed = run_module(nouveau_blacklist, {"state": "absent"}, check_mode=check_mode)
    assert not failed and result["changed"] and result["reboot_required"]
    assert debian.p(CONF).exists() is check_mode
    assert commands.mutations() == ([] if check_mode else ["update-initramfs -u -k all"])


@pytest.mark.parametrize("check_mode", [True, False])
def test_no_initramfs_tool_fails_before_any_change(host, commands, run_module, check_mode):
    host.kernel()
    host.modules("nouveau 1 0 - Live 0x0")
    commands.tools |= {"modprobe"}
    snap = host.snapshot()
    result, failed = run_module(nouveau_blacklist, {}, check_mode=check_mode)
    assert failed and "neither update-initramfs" in result["msg"]
    assert host.snapshot() == snap and commands.calls == []


def test_unload_race_becomes_reboot_required(debian, commands, run_module):
    debian.modules("nouveau 1 0 - Live 0x0")
    debian.file(CONF, _nouveau.CONTENT)
    commands.on(r"^modprobe -r nouveau$", (1, "", "modprobe: FATAL: Module nouveau is in use.\n"))
    result, failed = run_module(nouveau_blacklist, {})
    assert not failed and result["reboot_required"] and result["changed"] is False
    assert "Module nouveau is in use" in str(result["warnings"])

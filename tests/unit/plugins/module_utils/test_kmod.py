from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS
from ansible_collections.gpuops.platform.plugins.module_utils.host import _kmod


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "nouveau 2433024 1 drm_ttm_helper,ttm, Live 0x0000000000000000",
            {"nouveau": {"size": 2433024, "refcnt": 1, "deps": ["drm_ttm_helper", "ttm"], "state": "Live"}},
        ),
        (
            "nvidia_peermem 16384 0 - Live 0xffffffffc0a00000 (POE)",
            {"nvidia_peermem": {"size": 16384, "refcnt": 0, "deps": [], "state": "Live"}},
        ),
        # CONFIG_MODULE_UNLOAD=n: count and users are "-" (the H100 VM of tests/fixtures/hardware/real/h100-vm)
        (
            "nvidia 14299136 - - Live 0xffffffffc0400000 (O)",
            {"nvidia": {"size": 14299136, "refcnt": None, "deps": [], "state": "Live"}},
        ),
        ("garbage line", {}),
        ("x abc 0 - Live 0x0", {}),
        ("x 1 abc - Live 0x0", {}),
    ],
)
def test_parse_proc_modules(line, expected):
    assert _kmod.parse_proc_modules(line + "\n") == expected


@pytest.mark.parametrize(
    "modules, holders, expected",
    [
        ([], [], {"loaded": False, "refcount": 0, "holders": [], "in_use": False}),
        (["nouveau 1 0 - Live 0x0"], [], {"loaded": True, "refcount": 0, "holders": [], "in_use": False}),
        (["nouveau 1 2 - Live 0x0"], [], {"loaded": True, "refcount": 2, "holders": [], "in_use": True}),
        # a kernel that cannot unload modules: the count is unknown and the module stays until a reboot
        (["nouveau 1 - - Live 0x0"], [], {"loaded": True, "refcount": None, "holders": [], "in_use": True}),
        (
            ["nouveau 1 0 - Live 0x0"],
            ["drm_kms_helper"],
            {"loaded": True, "refcount": 0, "holders": ["drm_kms_helper"], "in_use": True},
        ),
    ],
)
def test_module_usage(host, modules, holders, expected):
    host.modules(*modules)
    for h in holders:
        host.file(f"/sys/module/nouveau/holders/{h}/.keep")
    fs = HostFS()
    assert _kmod.module_usage(fs, _kmod.loaded_modules(fs), "nouveau") == expected


@pytest.mark.parametrize(
    "files, cmdline, expected",
    [
        ({}, "", []),
        (
            {"/etc/modprobe.d/blacklist-nouveau.conf": "blacklist nouveau\n"},
            "",
            ["/etc/modprobe.d/blacklist-nouveau.conf"],
        ),
        ({"/lib/modprobe.d/nv.conf": "# blacklist nouveau\noptions nouveau modeset=0\n"}, "", []),
        ({"/usr/lib/modprobe.d/nv.conf": "blacklist   nouveau  \n"}, "", ["/usr/lib/modprobe.d/nv.conf"]),
        # /etc hides a file of the same name in /lib
        ({"/lib/modprobe.d/nv.conf": "blacklist nouveau\n", "/etc/modprobe.d/nv.conf": "# emptied\n"}, "", []),
        ({"/etc/modprobe.d/nv.txt": "blacklist nouveau\n"}, "", []),  # only *.conf counts
        ({"/etc/modprobe.d/a.conf": "blacklist \\\n nouveau\n"}, "", ["/etc/modprobe.d/a.conf"]),
        ({}, "quiet modprobe.blacklist=nouveau,radeon", ["kernel command line (modprobe.blacklist=nouveau,radeon)"]),
    ],
)
def test_blacklist_sources(host, files, cmdline, expected):
    for path, text in files.items():
        host.file(path, text)
    assert _kmod.blacklist_sources(HostFS(), "nouveau", _kmod.parse_cmdline(cmdline)) == expected


def test_parse_cmdline():
    assert _kmod.parse_cmdline("ro intel_iommu=on iommu=pt quiet a=b=c") == {
        "ro": None,
        "intel_iommu": "on",
        "iommu": "pt",
        "quiet": None,
        "a": "b=c",
    }

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils import _preflight

CLEAN = {
    "kernel": {"release": "5.15.0-119-generic", "headers_installed": True},
    "accelerators": [{"address": "0000:1b:00.0"}],
    "nvswitches": [],
    "nics": [{"address": "0000:18:00.0", "netdev": "ibp24s0", "netdevs": ["ibp24s0"], "sriov_totalvfs": 16}],
    "pcie_bridges": [
        {"address": "0000:16:02.0", "config_readable": True, "acs": {"control": "0x0000", "enabled": False}}
    ],
    "nouveau": {"loaded": False, "in_use": False, "refcount": 0, "blacklisted": True},
    "nvidia_driver": {"loaded": True, "version": "570.124.06", "installed_version": "570.124.06"},
    "nvidia_peermem": {"loaded": True},
    "ofed": {"flavor": "inbox", "version": None, "raw": None},
    "fabricmanager": {"installed": False, "version": None, "active": False},
    "iommu": {"enabled": False, "passthrough": None, "default_domain": None, "cmdline": {}},
    "secure_boot": {"efi": True, "state": "disabled"},
}
PLAN = {
    "nvidia_driver": "host",
    "driver_build": True,
    "ofed": "none",
    "gpudirect": True,
    "sriov": [],
    "unsigned_modules": True,
}


def _with(base, changes):
    out = copy.deepcopy(base)
    for path, value in changes.items():
        node = out
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return out


FM_OK = {"installed": True, "version": "570.124.06", "package": "nvidia-fabricmanager-570", "active": True}

CASES = [
    ("clean host", {}, {}, []),
    ("no headers", {"kernel.headers_installed": False}, {}, [("kernel-headers-missing", "error")]),
    ("no headers, no build", {"kernel.headers_installed": False}, {"driver_build": False}, []),
    ("nouveau loaded", {"nouveau.loaded": True}, {}, [("nouveau-loaded", "error")]),
    ("nouveau loaded, no driver", {"nouveau.loaded": True}, {"nvidia_driver": "none"}, []),
    ("nouveau not blacklisted", {"nouveau.blacklisted": False}, {}, [("nouveau-not-blacklisted", "warning")]),
    ("host driver + container", {}, {"nvidia_driver": "container"}, [("host-driver-with-driver-container", "error")]),
    ("container only", {"nvidia_driver.installed_version": None}, {"nvidia_driver": "container"}, []),
    (
        "host MOFED + DOCA driver",
        {"ofed.flavor": "mlnx_ofed"},
        {"ofed": "operator"},
        [("host-ofed-with-doca-driver", "error")],
    ),
    (
        "host DOCA-OFED + DOCA driver",
        {"ofed.flavor": "doca_ofed"},
        {"ofed": "operator"},
        [("host-ofed-with-doca-driver", "error")],
    ),
    ("inbox + DOCA driver", {}, {"ofed": "operator"}, []),
    ("nvswitch, no fm", {"nvswitches": [{"address": "0000:05:00.0"}]}, {}, [("fabricmanager-missing", "error")]),
    (
        "nvswitch, fm mismatch",
        {"nvswitches": [{"address": "0000:05:00.0"}], "fabricmanager": dict(FM_OK, version="570.86.15")},
        {},
        [("fabricmanager-version-mismatch", "error")],
    ),
    (
        "nvswitch, fm stopped",
        {"nvswitches": [{"address": "0000:05:00.0"}], "fabricmanager": dict(FM_OK, active=False)},
        {},
        [("fabricmanager-inactive", "error")],
    ),
    ("nvswitch, fm ok", {"nvswitches": [{"address": "0000:05:00.0"}], "fabricmanager": FM_OK}, {}, []),
    (
        "nvswitch, no driver yet",
        {
            "nvswitches": [{"address": "0000:05:00.0"}],
            "nvidia_driver": {"loaded": False, "version": None, "installed_version": None},
        },
        {"gpudirect": False},
        [("fabricmanager-needs-driver", "info")],
    ),
    (
        "nvswitch, container with host fm",
        {"nvswitches": [{"address": "0000:05:00.0"}], "fabricmanager": FM_OK, "nvidia_driver.installed_version": None},
        {"nvidia_driver": "container"},
        [("fabricmanager-host-and-container", "warning")],
    ),
    (
        "acs on",
        {"pcie_bridges": [{"address": "0000:16:02.0", "config_readable": True, "acs": {"enabled": True}}]},
        {},
        [("acs-enabled", "error")],
    ),
    (
        "acs on, no gpudirect",
        {"pcie_bridges": [{"address": "0000:16:02.0", "acs": {"enabled": True}}]},
        {"gpudirect": False},
        [],
    ),
    (
        "acs unreadable",
        {"pcie_bridges": [{"address": "0000:16:02.0", "config_readable": False, "acs": None}]},
        {},
        [("acs-unknown", "warning")],
    ),
    (
        "iommu translating",
        {"iommu": {"enabled": True, "passthrough": False, "default_domain": "DMA"}},
        {},
        [("iommu-not-passthrough", "error")],
    ),
    ("iommu pt", {"iommu": {"enabled": True, "passthrough": True, "default_domain": "identity"}}, {}, []),
    ("no peermem", {"nvidia_peermem.loaded": False}, {}, [("nvidia-peermem-not-loaded", "info")]),
    ("vfs ok", {}, {"sriov": [{"pf": "ibp24s0", "num_vfs": 16}]}, []),
    ("vfs above limit", {}, {"sriov": [{"pf": "0000:18:00.0", "num_vfs": 32}]}, [("sriov-vfs-above-limit", "error")]),
    ("vfs unknown pf", {}, {"sriov": [{"pf": "eth9", "num_vfs": 1}]}, [("sriov-pf-unknown", "error")]),
    (
        "vfs not capable",
        {"nics": [{"address": "0000:18:00.0", "netdev": "ibp24s0", "sriov_totalvfs": None}]},
        {"sriov": [{"pf": "ibp24s0", "num_vfs": 1}]},
        [("sriov-not-capable", "error")],
    ),
    ("secure boot", {"secure_boot.state": "enabled"}, {}, [("secure-boot-unsigned-modules", "error")]),
    ("secure boot, signed", {"secure_boot.state": "enabled"}, {"unsigned_modules": False}, []),
    ("secure boot unknown", {"secure_boot.state": "unknown"}, {}, [("secure-boot-unknown", "warning")]),
]


@pytest.mark.parametrize("name, facts, plan, expected", CASES, ids=[c[0] for c in CASES])
def test_decision_table(name, facts, plan, expected):
    findings = _preflight.evaluate(_with(CLEAN, facts), dict(PLAN, **plan))
    assert [(f["id"], f["severity"]) for f in findings] == expected
    for f in findings:
        assert f["message"] and f["remedy"]


@pytest.mark.parametrize(
    "severities, fail_on, failing",
    [
        (["error", "warning"], "error", 1),
        (["warning", "info"], "error", 0),
        (["warning", "info"], "warning", 1),
        (["error", "warning"], "never", 0),
    ],
)
def test_fail_on(severities, fail_on, failing):
    findings = [{"id": s, "severity": s} for s in severities]
    assert len(_preflight.failing(findings, fail_on)) == failing

"""The host rules as tables: (facts changes, intent changes) -> [(id, severity)], one table per rule, plus the
shape of every finding (values, not reprs) and host_prep's plan."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.host import (
    _driver_rules,
    _fabricmanager_rules,
    _host_findings,
    _pcie_rules,
)
from ansible_collections.gpuops.platform.plugins.module_utils.host import _host_rules as rules

NIC = {
    "address": "0000:14:00.0",
    "netdev": "ens1f0np0",
    "netdevs": ["ens1f0np0"],
    "rdma_device": "mlx5_0",
    "sriov_totalvfs": 8,
    "sriov_numvfs": 0,
}
GPU = {"address": "0000:1b:00.0", "vendor_id": "10de", "device_id": "26b9", "model": "NVIDIA L40S", "driver": None}
CLEAN: dict[str, Any] = {
    "kernel": {"release": "5.15.0-119-generic", "headers_installed": True},
    "accelerators": [GPU],
    "nvswitches": [],
    "nics": [NIC],
    "pcie_bridges": [
        {"address": "0000:16:02.0", "config_readable": True, "acs": {"control": "0x0000", "enabled": False}}
    ],
    "nouveau": {"loaded": False, "in_use": False, "refcount": 0, "blacklisted": True, "blacklist_sources": ["x"]},
    "nvidia_driver": {"loaded": True, "version": "570.124.06", "installed_version": "570.124.06"},
    "nvidia_peermem": {"loaded": True},
    "ofed": {"flavor": "inbox", "version": None, "raw": None},
    "fabricmanager": {"installed": False, "version": None, "active": False},
    "iommu": {"enabled": False, "passthrough": None, "default_domain": None, "cmdline": {}},
    "secure_boot": {"efi": True, "state": "disabled"},
}
NO_DRIVER = {"nvidia_driver": {"loaded": False, "version": None, "installed_version": None}}
SWITCH = {"nvswitches": [{"address": "0000:05:00.0"}]}
FM_OK = {"installed": True, "version": "570.124.06", "package": "nvidia-fabricmanager-570", "active": True}
MOFED = {"ofed": {"flavor": "mlnx_ofed", "version": "24.10-1.1.4.0", "raw": "MLNX_OFED_LINUX-24.10-1.1.4.0:"}}
ACS_ON = {
    "pcie_bridges": [
        {"address": "0000:16:02.0", "config_readable": True, "acs": {"control": "0x001d", "enabled": True}}
    ]
}


def with_(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for path, value in changes.items():
        node = out
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = copy.deepcopy(value)
    return out


def run(rule: str, facts: dict[str, Any], intent: dict[str, Any]) -> list[tuple[str, str]]:
    findings = rules.RULES[rule](with_(CLEAN, facts), {**_host_findings.DEFAULT_INTENT, "node": "n1", **intent})
    for f in findings:
        assert set(f) >= {"id", "severity", "object", "evidence", "cause", "fix", "fixed_by"}
        assert f["severity"] in _host_findings.SEVERITIES and f["cause"] and f["fix"]
        text = rules.describe(f)
        assert "{'" not in text and "['" not in text and "None (" not in text, text  # values, not reprs
    return [(f["id"], f["severity"]) for f in findings]


TABLES = {
    "headers": [
        ("headers present", {}, {"driver_build": True}, []),
        (
            "headers missing, build",
            {"kernel.headers_installed": False},
            {"driver_build": True},
            [("kernel-headers-missing", "error")],
        ),
        ("headers missing, no build", {"kernel.headers_installed": False}, {}, []),
    ],
    "nouveau": [
        ("not loaded, blacklisted", {}, {"nvidia_driver": "host"}, []),
        (
            "loaded, host driver",
            {"nouveau.loaded": True, "nouveau.blacklisted": False},
            {"nvidia_driver": "host"},
            [("nouveau-loaded", "error")],
        ),
        ("loaded, no nvidia planned", {"nouveau.loaded": True}, {"nvidia_driver": "none"}, []),
        (
            "loaded, managed by host_prep",
            {"nouveau.loaded": True, "nouveau.blacklisted": False},
            {"nouveau": "present"},
            [("nouveau-loaded", "error")],
        ),
        (
            "not blacklisted",
            {"nouveau.blacklisted": False},
            {"nvidia_driver": "container"},
            [("nouveau-not-blacklisted", "warning")],
        ),
        (
            "not blacklisted, validate",
            {"nouveau.blacklisted": False},
            {"nouveau": "present", "stage": "validate"},
            [("nouveau-not-blacklisted", "error")],
        ),
        (
            "blacklisted, in use",
            {"nouveau.loaded": True, "nouveau.in_use": True},
            {"nouveau": "present", "stage": "validate"},
            [("nouveau-loaded", "error")],
        ),
        (
            "blacklisted, in use, reboot pending",
            {"nouveau.loaded": True},
            {"nouveau": "present", "stage": "validate", "reboot_pending": True},
            [("nouveau-loaded", "warning")],
        ),
        ("remove, still blacklisted", {}, {"nouveau": "absent"}, [("nouveau-blacklisted", "warning")]),
        ("remove, done", {"nouveau.blacklisted": False}, {"nouveau": "absent", "stage": "validate"}, []),
    ],
    "driver": [
        (
            "host driver, container planned",
            {},
            {"nvidia_driver": "container"},
            [("host-driver-with-driver-container", "error")],
        ),
        (
            "installed only, container planned",
            {"nvidia_driver": {"loaded": False, "version": None, "installed_version": "570.124.06"}},
            {"nvidia_driver": "container"},
            [("host-driver-with-driver-container", "error")],
        ),
        (
            "host driver, container, excluded",
            {},
            {"nvidia_driver": "container", "exclude_host_driver_nodes": True},
            [("host-driver-node-excluded", "info")],
        ),
        ("no host driver, container", NO_DRIVER, {"nvidia_driver": "container"}, []),
        ("host driver, host planned", {}, {"nvidia_driver": "host"}, []),
    ],
    "mofed": [
        ("MOFED + DOCA driver", MOFED, {"ofed": "operator"}, [("host-ofed-with-doca-driver", "error")]),
        (
            "DOCA-OFED + DOCA driver",
            {"ofed.flavor": "doca_ofed"},
            {"ofed": "operator"},
            [("host-ofed-with-doca-driver", "error")],
        ),
        ("inbox + DOCA driver", {}, {"ofed": "operator"}, []),
        (
            "rdma, useHostMofed, no MOFED",
            NO_DRIVER,
            {"nvidia_driver": "container", "rdma": True, "use_host_mofed": True},
            [("rdma-host-mofed-mismatch", "error")],
        ),
        (
            "rdma, no useHostMofed, MOFED",
            {**MOFED, **NO_DRIVER},
            {"nvidia_driver": "container", "rdma": True},
            [("rdma-host-mofed-mismatch", "error")],
        ),
        (
            "rdma, agree",
            {**MOFED, **NO_DRIVER},
            {"nvidia_driver": "container", "rdma": True, "use_host_mofed": True},
            [],
        ),
        (
            "rdma, excluded host-driver node",
            MOFED,
            {"nvidia_driver": "container", "exclude_host_driver_nodes": True, "rdma": True},
            [],
        ),
        ("rdma off", MOFED, {"nvidia_driver": "container"}, []),
        (
            "rdma, OFED not identified",
            {**NO_DRIVER, "ofed": {"flavor": "unknown", "version": None, "raw": "weird"}},
            {"nvidia_driver": "container", "rdma": True},
            [("rdma-host-ofed-unknown", "error")],
        ),
    ],
    "fabricmanager": [
        ("no nvswitch", {}, {"nvidia_driver": "host"}, []),
        ("missing", SWITCH, {"nvidia_driver": "host"}, [("fabricmanager-missing", "error")]),
        (
            "mismatch",
            {**SWITCH, "fabricmanager": dict(FM_OK, version="570.86.15")},
            {"nvidia_driver": "host"},
            [("fabricmanager-version-mismatch", "error")],
        ),
        (
            "stopped",
            {**SWITCH, "fabricmanager": dict(FM_OK, active=False)},
            {"nvidia_driver": "host"},
            [("fabricmanager-inactive", "error")],
        ),
        ("ok", {**SWITCH, "fabricmanager": FM_OK}, {"nvidia_driver": "host"}, []),
        (
            "state unknown",
            {**SWITCH, "fabricmanager": dict(FM_OK, active=None)},
            {"nvidia_driver": "host"},
            [("fabricmanager-state-unknown", "error")],
        ),
        (
            "partial facts, no installed key",
            {**SWITCH, "fabricmanager": {"version": "570.124.06", "active": False}},
            {"nvidia_driver": "host"},
            [("fabricmanager-inactive", "error")],
        ),
        # issue 27: the host driver is planned but absent - host_prep's fabricmanager fix cannot run: refused
        (
            "no driver yet",
            {**SWITCH, **NO_DRIVER},
            {"nvidia_driver": "host"},
            [("fabricmanager-needs-driver", "error")],
        ),
        (
            "no driver yet, fabricmanager planned",
            {**SWITCH, **NO_DRIVER},
            {"nvidia_driver": "host", "fabricmanager": True},
            [("fabricmanager-needs-driver", "error")],
        ),
        (
            "no driver, fabricmanager present without a host driver plan",
            {**SWITCH, **NO_DRIVER},
            {"nvidia_driver": "none", "fabricmanager": True},
            [("fabricmanager-needs-driver", "error")],
        ),
        (
            "no driver, driver container, host_prep_fabricmanager present",
            {**SWITCH, **NO_DRIVER},
            {"nvidia_driver": "container", "fabricmanager": True},
            [("fabricmanager-needs-driver", "error")],
        ),
        (
            "no driver, none planned",
            {**SWITCH, **NO_DRIVER},
            {"nvidia_driver": "none"},
            [("fabricmanager-needs-driver", "info")],
        ),
        ("no driver, driver container", {**SWITCH, **NO_DRIVER}, {"nvidia_driver": "container"}, []),
        (
            "only an installed driver (not loaded) is a driver",
            {**SWITCH, "nvidia_driver": {"loaded": False, "version": None, "installed_version": "570.124.06"}},
            {"nvidia_driver": "host", "fabricmanager": True},
            [("fabricmanager-missing", "error")],
        ),
        (
            "container with host fm",
            {**SWITCH, **NO_DRIVER, "fabricmanager": FM_OK},
            {"nvidia_driver": "container"},
            [("fabricmanager-host-and-container", "warning")],
        ),
        (
            "container, excluded host-driver node",
            SWITCH,
            {"nvidia_driver": "container", "exclude_host_driver_nodes": True},
            [("fabricmanager-missing", "error")],
        ),
    ],
    "acs": [
        ("on, gpudirect", ACS_ON, {"gpudirect": True}, [("acs-enabled", "error")]),
        ("on, no gpudirect", ACS_ON, {}, []),
        (
            "on, host_prep_acs=disable",
            ACS_ON,
            {"acs": {"state": "disabled", "devices": []}},
            [("acs-enabled", "error")],
        ),
        ("on, other device targeted", ACS_ON, {"acs": {"state": "disabled", "devices": ["0000:99:00.0"]}}, []),
        ("off, enable wanted", {}, {"acs": {"state": "enabled", "devices": []}}, [("acs-disabled", "warning")]),
        (
            "enable with gpudirect",
            ACS_ON,
            {"gpudirect": True, "acs": {"state": "enabled", "devices": []}},
            [("acs-enabled-with-gpudirect", "error")],
        ),
        (
            "unreadable",
            {"pcie_bridges": [{"address": "0000:16:02.0", "config_readable": False, "acs": None}]},
            {"gpudirect": True},
            [("acs-unknown", "warning")],
        ),
    ],
    "gpudirect": [
        (
            "iommu translating",
            {
                "iommu": {
                    "enabled": True,
                    "passthrough": False,
                    "default_domain": "DMA",
                    "cmdline": {"intel_iommu": "on"},
                }
            },
            {"gpudirect": True},
            [("iommu-not-passthrough", "error")],
        ),
        (
            "iommu pt",
            {"iommu": {"enabled": True, "passthrough": True, "default_domain": "identity", "cmdline": {}}},
            {"gpudirect": True},
            [],
        ),
        ("no peermem", {"nvidia_peermem.loaded": False}, {"gpudirect": True}, [("nvidia-peermem-not-loaded", "info")]),
        ("no gpudirect", {"nvidia_peermem.loaded": False}, {}, []),
    ],
    "sriov": [
        ("by netdev", {}, {"sriov": [{"pf": "ens1f0np0", "num_vfs": 0}]}, []),
        ("by full address", {}, {"sriov": [{"pf": "0000:14:00.0", "num_vfs": 0}]}, []),
        ("by short address", {}, {"sriov": [{"pf": "14:00.0", "num_vfs": 0}]}, []),
        ("by upper-case address", {}, {"sriov": [{"pf": "0000:14:00.0".upper(), "num_vfs": 0}]}, []),
        ("to change", {}, {"sriov": [{"pf": "14:00.0", "num_vfs": 4}]}, [("sriov-vfs-mismatch", "info")]),
        (
            "to change, validate",
            {},
            {"sriov": [{"pf": "14:00.0", "num_vfs": 4}], "stage": "validate"},
            [("sriov-vfs-mismatch", "error")],
        ),
        ("above limit", {}, {"sriov": [{"pf": "14:00.0", "num_vfs": 9}]}, [("sriov-vfs-above-limit", "error")]),
        ("negative", {}, {"sriov": [{"pf": "14:00.0", "num_vfs": -1}]}, [("sriov-vfs-invalid", "error")]),
        ("unknown netdev", {}, {"sriov": [{"pf": "eth9", "num_vfs": 1}]}, [("sriov-pf-unknown", "error")]),
        ("unknown address", {}, {"sriov": [{"pf": "0000:99:00.0", "num_vfs": 1}]}, [("sriov-pf-unknown", "error")]),
        ("malformed address", {}, {"sriov": [{"pf": "14:00", "num_vfs": 1}]}, [("sriov-pf-invalid", "error")]),
        (
            "not capable",
            {"nics": [dict(NIC, sriov_totalvfs=None)]},
            {"sriov": [{"pf": "ens1f0np0", "num_vfs": 1}]},
            [("sriov-not-capable", "error")],
        ),
    ],
    "secure_boot": [
        (
            "enabled, unsigned",
            {"secure_boot.state": "enabled"},
            {"unsigned_modules": True},
            [("secure-boot-unsigned-modules", "error")],
        ),
        ("enabled, signed", {"secure_boot.state": "enabled"}, {}, []),
        (
            "unknown, unsigned",
            {"secure_boot.state": "unknown"},
            {"unsigned_modules": True},
            [("secure-boot-unknown", "warning")],
        ),
    ],
}
CASES = [(rule, *case) for rule, table in TABLES.items() for case in table]


@pytest.mark.parametrize(("rule", "name", "facts", "intent", "expected"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_rule_table(rule, name, facts, intent, expected):
    assert run(rule, facts, intent) == expected


def test_every_rule_has_a_table():
    assert set(TABLES) == set(rules.RULES) == set(_host_findings.CONCERNS)


def test_short_pf_address_resolves_to_the_normalized_address():
    resolved, findings = _pcie_rules.resolve_sriov(CLEAN, [{"pf": "14:00.0", "num_vfs": 4}])
    assert findings == [] and resolved == [{"pf": "14:00.0", "address": "0000:14:00.0", "num_vfs": 4, "current": 0}]


def test_messages_print_values():
    pf = rules.RULES["sriov"](
        CLEAN, {**_host_findings.DEFAULT_INTENT, "sriov": [{"pf": "0000:14:00.0", "num_vfs": 9}]}
    )[0]
    assert "PF 0000:14:00.0 but" in pf["cause"] and "(0000:14:00.0)" not in pf["cause"]
    pf = rules.RULES["sriov"](CLEAN, {**_host_findings.DEFAULT_INTENT, "sriov": [{"pf": "ens1f0np0", "num_vfs": 9}]})[0]
    assert "PF ens1f0np0 (0000:14:00.0)" in pf["cause"]
    facts = with_(
        CLEAN,
        {"iommu": {"enabled": True, "passthrough": False, "default_domain": "DMA", "cmdline": {"intel_iommu": "on"}}},
    )
    iommu = rules.RULES["gpudirect"](facts, {**_host_findings.DEFAULT_INTENT, "gpudirect": True})[0]
    assert "kernel command line: intel_iommu=on" in iommu["evidence"]


def test_nouveau_names_the_gpu_it_is_bound_to():
    facts = with_(
        CLEAN, {"nouveau.loaded": True, "nouveau.blacklisted": False, "accelerators": [dict(GPU, driver="nouveau")]}
    )
    (f,) = rules.RULES["nouveau"](facts, {**_host_findings.DEFAULT_INTENT, "nvidia_driver": "host"})
    assert "bound to 0000:1b:00.0 (NVIDIA L40S)" in f["cause"]


@pytest.mark.parametrize(
    "refcount, evidence",
    [
        (2, "nouveau loaded, refcount 2"),
        (None, "nouveau loaded, refcount unknown (a kernel without module unloading: only a reboot removes it)"),
    ],
)
def test_nouveau_evidence_names_the_refcount_or_why_there_is_none(refcount, evidence):
    facts = with_(CLEAN, {"nouveau.loaded": True, "nouveau.refcount": refcount, "nouveau.in_use": True})
    (f,) = rules.RULES["nouveau"](facts, {**_host_findings.DEFAULT_INTENT, "nvidia_driver": "host"})
    assert f["id"] == "nouveau-loaded" and f["evidence"][0] == evidence


def test_fabricmanager_lockstep_is_the_one_rule():
    assert _fabricmanager_rules.fabricmanager_lockstep(CLEAN) is None  # no NVSwitch
    assert _fabricmanager_rules.fabricmanager_lockstep(with_(CLEAN, {**SWITCH, **NO_DRIVER})) is None  # no driver yet
    f = _fabricmanager_rules.fabricmanager_lockstep(
        with_(CLEAN, {**SWITCH, "fabricmanager": dict(FM_OK, version="570.86.15")})
    )
    assert f["id"] == "fabricmanager-version-mismatch" and "570.86.15" in f["cause"] and "570.124.06" in f["cause"]


@pytest.mark.parametrize(
    ("facts", "intent", "labels"),
    [
        (
            {},
            {"nvidia_driver": "container", "exclude_host_driver_nodes": True},
            {"nvidia.com/gpu.deploy.driver": "false"},
        ),
        ({}, {"nvidia_driver": "container"}, {}),
        (NO_DRIVER, {"nvidia_driver": "container", "exclude_host_driver_nodes": True}, {}),
        ({}, {"nvidia_driver": "host", "exclude_host_driver_nodes": True}, {}),
    ],
)
def test_node_labels(facts, intent, labels):
    assert _driver_rules.node_labels(with_(CLEAN, facts), {**_host_findings.DEFAULT_INTENT, **intent}) == labels


PLAN_CASES = [
    ("nothing", {}, {}, {"fixes": []}),
    ("nouveau auto, NVIDIA GPU", {}, {"nouveau": "auto"}, {"nouveau": "present", "fixes": ["nouveau"]}),
    ("nouveau auto, no NVIDIA GPU", {"accelerators": []}, {"nouveau": "auto"}, {"nouveau": None, "fixes": []}),
    ("nouveau remove", {}, {"nouveau": "remove"}, {"nouveau": "absent", "fixes": ["nouveau"]}),
    (
        "acs auto with gpudirect",
        ACS_ON,
        {"acs": "auto"},
        {"acs": {"state": "disabled", "devices": []}, "fixes": ["acs"]},
    ),
    (
        "acs devices normalized",
        {},
        {"acs": "disable", "acs_devices": ["16:02.0"]},
        {"acs": {"state": "disabled", "devices": ["0000:16:02.0"]}},
    ),
    (
        "fm auto, host driver, NVSwitch",
        SWITCH,
        {"fabricmanager": "auto"},
        {"fabricmanager": True, "fixes": ["fabricmanager"]},
    ),
    ("fm auto, no NVSwitch", {}, {"fabricmanager": "auto"}, {"fabricmanager": False}),
]


@pytest.mark.parametrize(("name", "facts", "policy", "expected"), PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_plan(name, facts, policy, expected):
    f = with_(CLEAN, facts)
    intent = {**_host_findings.DEFAULT_INTENT, "nvidia_driver": "host", "gpudirect": rules.resolve_gpudirect(f, "auto")}
    got = rules.plan(f, policy, intent)
    assert {k: got[k] for k in expected} == expected


def test_plan_sriov_uses_normalized_addresses():
    intent = {**_host_findings.DEFAULT_INTENT, "sriov": [{"pf": "14:00.0", "num_vfs": 4}, {"pf": "eth9", "num_vfs": 1}]}
    got = rules.plan(CLEAN, {}, intent)
    assert got["sriov"] == [{"pf": "14:00.0", "address": "0000:14:00.0", "num_vfs": 4}] and got["fixes"] == ["sriov"]


@pytest.mark.parametrize(("setting", "expected"), [("auto", True), (True, True), ("false", False), (False, False)])
def test_resolve_gpudirect(setting, expected):
    assert rules.resolve_gpudirect(CLEAN, setting) is expected


def test_resolve_gpudirect_rejects_other_values():
    with pytest.raises(rules.InvalidInput, match="gpudirect must be auto, true or false, got maybe"):
        rules.resolve_gpudirect(CLEAN, "maybe")


def test_planned_findings_are_warnings_and_never_fail():
    facts = with_(CLEAN, SWITCH)
    intent = {"nvidia_driver": "host"}
    (f,) = rules.evaluate(facts, intent, checks=["fabricmanager"])
    assert (f["severity"], f["planned"]) == ("error", False) and rules.failing([f], "error") == [f]
    (f,) = rules.evaluate(facts, intent, checks=["fabricmanager"], planned_fixes=["fabricmanager"])
    assert (f["severity"], f["planned"]) == ("warning", True) and rules.failing([f], "warning") == []
    assert "[planned: a fix in this run addresses it]" in rules.describe(f)


def test_managed_keeps_only_managed_concerns():
    facts = with_(CLEAN, {**SWITCH, "nouveau.blacklisted": False})
    intent = {"nvidia_driver": "host", "stage": "validate", "nouveau": "present"}
    ids = [f["id"] for f in rules.evaluate(facts, intent, managed=["nouveau"])]
    assert ids == ["nouveau-not-blacklisted"]


@pytest.mark.parametrize(
    ("severities", "fail_on", "failing"),
    [
        (["error", "warning"], "error", 1),
        (["warning", "info"], "error", 0),
        (["warning", "info"], "warning", 1),
        (["error", "warning"], "never", 0),
    ],
)
def test_fail_on(severities, fail_on, failing):
    findings = [{"id": s, "severity": s} for s in severities]
    assert len(rules.failing(findings, fail_on)) == failing

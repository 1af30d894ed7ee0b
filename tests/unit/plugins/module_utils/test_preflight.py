"""gpu_host_preflight's decision as data (_preflight.evaluate): host_prep's plan from its policies, findings that
the plan fixes are not failures in preflight, validate keeps only what host_prep manages, and the GPU Operator
guards (driver container, exclusion label, useHostMofed, fabricmanager, planned fixes in check mode)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.host import _host_rules as rules
from ansible_collections.gpuops.platform.plugins.module_utils.host import _preflight

DGX: dict[str, Any] = {
    "kernel": {"release": "5.15.0-119-generic", "headers_installed": True},
    "accelerators": [{"address": "0000:1b:00.0", "vendor_id": "10de", "device_id": "2330", "driver": "nvidia"}],
    "nvswitches": [{"address": "0000:05:00.0"}],
    "nics": [
        {
            "address": "0000:18:00.0",
            "netdev": "ibp24s0",
            "netdevs": ["ibp24s0"],
            "rdma_device": "mlx5_0",
            "sriov_totalvfs": 16,
            "sriov_numvfs": 0,
        }
    ],
    "pcie_bridges": [
        {"address": "0000:16:02.0", "config_readable": True, "acs": {"control": "0x001d", "enabled": True}}
    ],
    "nouveau": {"loaded": False, "blacklisted": False, "blacklist_sources": []},
    "nvidia_driver": {"loaded": True, "version": "570.124.06", "installed_version": "570.124.06"},
    "nvidia_peermem": {"loaded": True},
    "ofed": {"flavor": "mlnx_ofed", "version": "24.10-1.1.4.0", "raw": "MLNX_OFED_LINUX-24.10-1.1.4.0:"},
    "fabricmanager": {"installed": False, "version": None, "active": False},
    "iommu": {"enabled": True, "passthrough": True, "default_domain": "identity", "cmdline": {"iommu": "pt"}},
    "secure_boot": {"efi": True, "state": "disabled"},
}
HOST_PREP = {"nouveau": "auto", "acs": "auto", "acs_devices": [], "fabricmanager": "auto"}


def params(**kw: Any) -> dict[str, Any]:
    base = {
        "node_name": "dgx",
        "stage": "preflight",
        "checks": None,
        "nvidia_driver": "host",
        "exclude_host_driver_nodes": False,
        "driver_build": False,
        "ofed": "none",
        "rdma": False,
        "use_host_mofed": False,
        "gpudirect": "auto",
        "sriov": [],
        "unsigned_modules": False,
        "fix": HOST_PREP,
        "planned_fixes": [],
        "reboot_pending": False,
        "fail_on": "error",
    }
    return {**base, **kw}


def ids(decision: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(f["id"], f["severity"], f["planned"]) for f in decision["findings"]]


def test_host_prep_preflight_plans_its_fixes_and_does_not_fail_on_them():
    d = _preflight.evaluate(DGX, params())
    assert d["plan"]["fixes"] == ["nouveau", "acs", "fabricmanager"] and d["plan"]["gpudirect"] is True
    assert ids(d) == [
        ("nouveau-not-blacklisted", "warning", True),
        ("fabricmanager-missing", "warning", True),
        ("acs-enabled", "warning", True),
    ]
    assert rules.failing(d["findings"], "warning") == []


NO_DRIVER = {"nvidia_driver": {"loaded": False, "version": None, "installed_version": None}}


@pytest.mark.parametrize(
    ("nvidia_driver", "fm_policy", "expected"),
    [
        # issue 27: the plan changes nouveau and ACS, then fabricmanager fails "no NVIDIA driver": refused before any
        (
            "host",
            "auto",
            [("nouveau-not-blacklisted", "warning", True), ("fabricmanager-needs-driver", "error", False)],
        ),
        (
            "host",
            "skip",
            [("nouveau-not-blacklisted", "warning", True), ("fabricmanager-needs-driver", "error", False)],
        ),
        (
            "none",
            "present",
            [("nouveau-not-blacklisted", "warning", True), ("fabricmanager-needs-driver", "error", False)],
        ),
        ("none", "auto", [("nouveau-not-blacklisted", "warning", True), ("fabricmanager-needs-driver", "info", False)]),
        ("container", "auto", [("nouveau-not-blacklisted", "warning", True)]),
    ],
)
def test_nvswitch_host_without_a_driver_is_refused_when_the_plan_needs_one(nvidia_driver, fm_policy, expected):
    d = _preflight.evaluate(
        {**DGX, **NO_DRIVER}, params(nvidia_driver=nvidia_driver, fix=dict(HOST_PREP, fabricmanager=fm_policy))
    )
    got = [f for f in ids(d) if f[0] != "acs-enabled"]
    assert got == expected
    refused = [f for f in d["findings"] if f["id"] == "fabricmanager-needs-driver" and f["severity"] == "error"]
    assert bool(rules.failing(d["findings"], "error")) is bool(refused)
    for f in refused:
        assert "install the NVIDIA driver" in f["fix"] and "driver container" in f["fix"]
        assert f["planned"] is False and f["fixed_by"] is None


def test_host_prep_skipping_a_fix_makes_its_finding_blocking():
    d = _preflight.evaluate(DGX, params(fix=dict(HOST_PREP, fabricmanager="skip")))
    assert ("fabricmanager-missing", "error", False) in ids(d)


def test_validate_checks_only_managed_concerns_and_they_must_hold():
    d = _preflight.evaluate(DGX, params(stage="validate", sriov=[{"pf": "18:00.0", "num_vfs": 4}]))
    assert ids(d) == [
        ("nouveau-not-blacklisted", "error", False),
        ("fabricmanager-missing", "error", False),
        ("acs-enabled", "error", False),
        ("sriov-vfs-mismatch", "error", False),
    ]
    d = _preflight.evaluate(
        DGX, params(stage="validate", fix={"nouveau": "skip", "acs": "skip", "fabricmanager": "skip"})
    )
    assert ids(d) == []


def test_short_pf_address_is_accepted_by_the_preflight():
    """sriov_vfs accepts 14:00.0; the preflight used to compare exact strings and refused it (sriov-pf-unknown)."""
    d = _preflight.evaluate(DGX, params(sriov=[{"pf": "18:00.0", "num_vfs": 4}]))
    assert d["plan"]["sriov"] == [{"pf": "18:00.0", "address": "0000:18:00.0", "num_vfs": 4}]
    assert not [f for f in d["findings"] if f["id"].startswith("sriov-pf")]


GUARD = {"checks": ["driver", "mofed", "fabricmanager"], "fix": None, "gpudirect": False}


@pytest.mark.parametrize(
    ("name", "facts", "opts", "expected", "labels"),
    [
        (
            "host driver, container, not excluded",
            {},
            {"nvidia_driver": "container"},
            [("host-driver-with-driver-container", "error", False)],
            {},
        ),
        (
            "host driver, container, excluded: label, and fabricmanager applies",
            {},
            {"nvidia_driver": "container", "exclude_host_driver_nodes": True},
            [("host-driver-node-excluded", "info", False), ("fabricmanager-missing", "error", False)],
            {"nvidia.com/gpu.deploy.driver": "false"},
        ),
        (
            "check mode: host_prep plans fabricmanager",
            {},
            {"nvidia_driver": "host", "planned_fixes": ["fabricmanager"]},
            [("fabricmanager-missing", "warning", True)],
            {},
        ),
        (
            "rdma useHostMofed disagrees",
            {"nvidia_driver": {"loaded": False, "version": None, "installed_version": None}},
            {"nvidia_driver": "container", "rdma": True},
            [("rdma-host-mofed-mismatch", "error", False)],
            {},
        ),
    ],
)
def test_gpu_operator_guards(name, facts, opts, expected, labels):
    f = copy.deepcopy(DGX)
    f.update(facts)
    d = _preflight.evaluate(f, params(**GUARD, **opts))
    assert ids(d) == expected and d["node_labels"] == labels
    assert all(x["host"] == "dgx" for x in d["findings"])


def test_bad_gpudirect_names_the_value():
    with pytest.raises(rules.InvalidInput, match="got sometimes"):
        _preflight.evaluate(DGX, params(gpudirect="sometimes"))


@pytest.mark.parametrize("fail_on", ["never", "error"])
def test_hosts_evaluated_together_equal_each_alone(fail_on):
    """O(hosts) (the guards on the hosts host_prep validated in this run, one module run): each host's result is
    what decide() gives for it alone (its name, facts and planned fixes, the call's other options), the findings and
    report cover all, and the call fails (fail_on error) or only reports (never) when one host fails."""
    clean = copy.deepcopy(DGX)
    clean["nvidia_driver"] = {"loaded": False, "version": None, "installed_version": None}
    clean["fabricmanager"] = {"installed": True, "version": None, "active": True}
    hosts = [
        {"node_name": "dgx-a", "facts": DGX, "planned_fixes": []},
        {"node_name": "dgx-b", "facts": clean, "planned_fixes": []},
        {"node_name": "dgx-c", "facts": DGX, "planned_fixes": ["fabricmanager"]},
    ]
    p = params(**GUARD, nvidia_driver="container", exclude_host_driver_nodes=True, fail_on=fail_on)
    out = _preflight.decide_hosts(dict(p, node_name=None, hosts=hosts))
    alone = []
    for h in hosts:
        one = _preflight.decide(h["facts"], dict(p, node_name=h["node_name"], planned_fixes=h["planned_fixes"]))
        one.pop("failed", None)
        alone.append(one)
    assert out["hosts"] == alone
    assert [r["passed"] for r in out["hosts"]] == [False, True, True]
    assert [r["node_labels"] for r in out["hosts"]] == [
        {"nvidia.com/gpu.deploy.driver": "false"},
        {},
        alone[2]["node_labels"],
    ]
    assert out["findings"] == [f for r in alone for f in r["findings"]]
    assert out["summary"]["error"] == 1 and out["passed"] is False
    assert out["msg"] == alone[0]["msg"] and out["msg"].startswith("dgx-a: host preflight: 1 finding(s)")
    assert out.get("failed", False) is (fail_on == "error")


def test_hosts_all_passing():
    out = _preflight.decide_hosts(dict(params(**GUARD), node_name=None, hosts=[]))
    assert out == {
        "changed": False,
        "hosts": [],
        "findings": [],
        "report": [],
        "summary": {"error": 0, "warning": 0, "info": 0},
        "passed": True,
        "msg": "0 host(s): every one passed",
    }

from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.modules import gpu_host_preflight
from hostsim import dgx_like


@pytest.fixture
def dgx(host, commands):
    dgx_like(host)
    host.modules("nouveau 2433024 0 drm_ttm_helper,ttm, Live 0x0")
    return host


@pytest.mark.parametrize("check_mode", [True, False])
def test_gathers_and_fails_on_errors(dgx, commands, run_module, check_mode):
    snap = dgx.snapshot()
    result, failed = run_module(
        gpu_host_preflight,
        {"nvidia_driver": "host", "gpudirect": True, "sriov": [{"pf": "ibp19s0", "num_vfs": 32}]},
        check_mode=check_mode,
    )
    assert failed and result["passed"] is False
    ids = [f["id"] for f in result["findings"]]
    # dgx_like has IOMMU groups and no iommu=pt on the command line: the IOMMU translates
    assert ids == [
        "nouveau-loaded",
        "fabricmanager-needs-driver",
        "acs-enabled",
        "iommu-not-passthrough",
        "sriov-vfs-above-limit",
    ]
    assert "nouveau-loaded" in result["msg"] and "sriov-vfs-above-limit" in result["msg"]
    # no driver while the host driver is planned: refused (issue 27; it was an info finding and host_prep failed later)
    assert result["summary"] == {"error": 5, "warning": 0, "info": 0}
    assert dgx.snapshot() == snap and commands.mutations() == []


@pytest.mark.parametrize("fail_on, failed_expected", [("error", False), ("warning", True), ("never", False)])
def test_given_facts_and_fail_on(commands, run_module, fail_on, failed_expected):
    facts = {"nouveau": {"loaded": False, "blacklisted": False}, "kernel": {"headers_installed": True}}
    result, failed = run_module(gpu_host_preflight, {"facts": facts, "nvidia_driver": "container", "fail_on": fail_on})
    assert failed is failed_expected
    assert [f["id"] for f in result["findings"]] == ["nouveau-not-blacklisted"]
    assert commands.calls == []  # facts given: nothing gathered


def test_rejects_unknown_choice(commands, run_module):
    result, failed = run_module(gpu_host_preflight, {"facts": {}, "nvidia_driver": "both"})
    assert failed and "nvidia_driver" in result["msg"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_short_pf_address_names_the_host_and_plans_the_normalized_address(dgx, commands, run_module, check_mode):
    snap = dgx.snapshot()  # dgx_like's first NIC is 0000:13:00.0 (ibp19s0), 16 VFs at most, 0 now
    result, failed = run_module(
        gpu_host_preflight,
        {
            "node_name": "dgx-0",
            "nvidia_driver": "container",
            "sriov": [{"pf": "13:00.0", "num_vfs": 4}],
            "fix": {"nouveau": "auto"},
        },
        check_mode=check_mode,
    )
    assert not failed, result["msg"]
    assert result["plan"]["sriov"] == [{"pf": "13:00.0", "address": "0000:13:00.0", "num_vfs": 4}]
    assert result["plan"]["fixes"] == ["nouveau", "sriov"]
    planned = {f["id"]: f for f in result["findings"] if f["planned"]}
    assert set(planned) == {"nouveau-loaded", "sriov-vfs-mismatch"} and all(
        f["host"] == "dgx-0" for f in planned.values()
    )
    assert result["msg"].startswith("dgx-0: host preflight passed")
    assert all(line.startswith("dgx-0: ") for line in result["report"])
    assert dgx.snapshot() == snap and commands.mutations() == []


def test_guard_result_carries_the_node_labels(commands, run_module):
    facts = {"nvidia_driver": {"loaded": True, "version": "570.124.06", "installed_version": "570.124.06"}}
    opts = {"facts": facts, "node_name": "n1", "checks": ["driver"], "nvidia_driver": "container", "fail_on": "never"}
    result, failed = run_module(gpu_host_preflight, {**opts, "exclude_host_driver_nodes": True})
    assert not failed and result["passed"] and result["node_labels"] == {"nvidia.com/gpu.deploy.driver": "false"}
    result, failed = run_module(gpu_host_preflight, opts)
    assert not failed and not result["passed"] and result["node_labels"] == {}
    assert "n1: host preflight: 1 finding(s) at or above error: host-driver-with-driver-container" in result["msg"]


def test_hosts_in_one_run_read_nothing(commands, run_module):
    """O(hosts): the guards on hosts whose facts are known, one module run, nothing run on the machine it runs on."""
    facts = {"nouveau": {"loaded": False, "blacklisted": False}, "kernel": {"headers_installed": True}}
    driver = dict(facts, nvidia_driver={"loaded": True, "version": "570.124.06", "installed_version": "570.124.06"})
    hosts = [{"node_name": "a", "facts": facts}, {"node_name": "b", "facts": driver}]
    args = {"hosts": hosts, "checks": ["driver"], "nvidia_driver": "container", "exclude_host_driver_nodes": True}
    result, failed = run_module(gpu_host_preflight, args)
    assert not failed and result["passed"] is True and commands.calls == []
    assert [(h["node_name"], h["node_labels"]) for h in result["hosts"]] == [
        ("a", {}),
        ("b", {"nvidia.com/gpu.deploy.driver": "false"}),
    ]
    assert [f["id"] for f in result["findings"]] == ["host-driver-node-excluded"]
    # the Node patch that sets the labels, only where there are labels to set
    assert [h.get("node_patch") for h in result["hosts"]] == [
        None,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "b", "labels": {"nvidia.com/gpu.deploy.driver": "false"}},
        },
    ]


@pytest.mark.parametrize("other", [{"facts": {}}, {"node_name": "x"}, {"probe": {}}])
def test_hosts_excludes_single_host_options(commands, run_module, other):
    result, failed = run_module(gpu_host_preflight, {"hosts": [{"node_name": "a", "facts": {}}], **other})
    assert failed and "mutually exclusive" in result["msg"] and "hosts" in result["msg"]


def test_inventory_hosts_needs_the_action_plugin(commands, run_module):
    result, failed = run_module(gpu_host_preflight, {"inventory_hosts": ["a"]})
    assert failed and "action plugin" in result["msg"] and commands.calls == []


# Issue 27: a bad host input names the option it came from (fix.acs_devices[i], sriov[i].pf, sriov[i].num_vfs),
# with host_prep's variable beside it, and the module fails before anything (dgx_like: ibp19s0 is 0000:13:00.0,
# 16 VFs at most).
@pytest.mark.parametrize(
    "args, match",
    [
        (
            {"fix": {"acs": "disable", "acs_devices": ["17:00"]}},
            "fix.acs_devices[0] (host_prep: host_prep_acs_devices[0])",
        ),
        ({"fix": {"acs": "disable", "acs_devices": ["0000:00:01.0", "x"]}}, "fix.acs_devices[1] (host_prep: "),
        ({"sriov": [{"pf": "13:00", "num_vfs": 1}]}, "sriov[0].pf 13:00 is not a PCI address"),
        ({"sriov": [{"pf": "ibp19s0", "num_vfs": 1}, {"pf": "nope0", "num_vfs": 1}]}, "sriov[1].pf nope0: "),
        ({"sriov": [{"pf": "ibp19s0", "num_vfs": -1}]}, "sriov[0].num_vfs -1 requested on PF ibp19s0"),
        ({"sriov": [{"pf": "ibp19s0", "num_vfs": 32}]}, "sriov[0].num_vfs: 32 VFs requested on PF ibp19s0"),
        ({"gpudirect": "maybe"}, "gpudirect must be auto, true or false, got maybe"),
    ],
)
def test_bad_input_names_its_option(dgx, commands, run_module, args, match):
    snap = dgx.snapshot()
    result, failed = run_module(gpu_host_preflight, {"nvidia_driver": "container", **args})
    assert failed and match in result["msg"], result["msg"]
    assert result.get("changed") is False and dgx.snapshot() == snap and commands.mutations() == []

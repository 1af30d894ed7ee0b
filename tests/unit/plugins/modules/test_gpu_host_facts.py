from __future__ import annotations

import pytest
from ansible_collections.gpuops.platform.plugins.modules import gpu_host_facts
from hostsim import dgx_like


@pytest.mark.parametrize("check_mode", [True, False])
def test_facts_on_dgx_profile(host, commands, run_module, check_mode):
    dgx_like(host)
    host.modules("nouveau 2433024 1 drm_ttm_helper,ttm, Live 0x0")
    commands.tools |= {"modinfo", "systemctl"}
    commands.on(r"^modinfo -F version nvidia$", (1, "", "modinfo: ERROR: Module nvidia not found.\n"))
    snap = host.snapshot()
    result, failed = run_module(gpu_host_facts, {}, check_mode=check_mode)
    assert not failed and result["changed"] is False
    facts = result["ansible_facts"]["gpuops_host"]
    assert (len(facts["accelerators"]), len(facts["nvswitches"]), len(facts["nics"])) == (8, 4, 8)
    assert facts["nouveau"] == {
        "loaded": True,
        "refcount": 1,
        "holders": [],
        "in_use": True,
        "blacklisted": False,
        "blacklist_sources": [],
    }
    assert facts["nvidia_driver"]["installed_version"] is None
    assert host.snapshot() == snap and commands.mutations() == []


def test_empty_host(host, commands, run_module):
    host.kernel(headers=False)
    result, failed = run_module(gpu_host_facts, {})
    facts = result["ansible_facts"]["gpuops_host"]
    assert not failed and facts["accelerators"] == [] and facts["pcie_bridges"] == []
    assert facts["kernel"]["headers_installed"] is False and facts["ofed"]["flavor"] == "none"
    assert facts["fabricmanager"] == {
        "installed": False,
        "package": None,
        "package_version": None,
        "version": None,
        "active": None,
        "enabled": None,
    }

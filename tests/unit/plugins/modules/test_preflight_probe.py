"""gpu_host_preflight's probe (host_prep skips a fix module with nothing to do): each planned fix's own module action
runs in check mode inside the preflight, so its answer is the module's. The table: on a fresh host and on the same
host after the real modules ran, the probe's ``pending`` equals what the module itself says in check mode, and the
probe changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.module_utils.common import _runner
from ansible_collections.gpuops.platform.plugins.module_utils.host import _preflight
from ansible_collections.gpuops.platform.plugins.modules import (
    gpu_host_preflight,
    nouveau_blacklist,
    pcie_acs,
    sriov_vfs,
)
from hostsim import lab_host

REPO = Path(__file__).resolve().parents[4]
# The lab's pcie-l40s profile: nouveau loaded and in use by the console, ConnectX-6 Dx ports with 8 VFs at most.
PF = "0000:14:00.0"
ARGS = {
    "node_name": "l40s-0",
    "nvidia_driver": "container",
    "sriov": [{"pf": PF, "num_vfs": 4}],
    "fix": {"nouveau": "auto", "acs": "skip", "fabricmanager": "skip"},
    "fail_on": "never",
    "probe": {},
}


@pytest.fixture
def l40s(monkeypatch, commands):
    commands.tools |= {"modprobe", "update-initramfs"}
    commands.on(r"^update-initramfs -u -k all$", (0, "", ""))
    return lab_host("pcie-l40s", monkeypatch)


def module_says(run_module, check_mode=True):
    """What the fix modules themselves report, in check mode: {fix: (changed, reboot_required)}."""
    nv, failed = run_module(nouveau_blacklist, {"state": "present"}, check_mode=check_mode)
    assert not failed, nv
    vfs, failed = run_module(sriov_vfs, {"pf": PF, "num_vfs": 4}, check_mode=check_mode)
    assert not failed, vfs
    return {"nouveau": (nv["changed"], nv["reboot_required"]), "sriov": (vfs["changed"], False)}


def probe_says(result):
    nv, vfs = result["pending"]["nouveau"], result["pending"]["sriov"][PF]
    return {"nouveau": (nv["pending"], nv["reboot_required"]), "sriov": (vfs["pending"], vfs["reboot_required"])}


def test_the_probe_answers_as_the_modules_do_and_changes_nothing(l40s, commands, run_module):
    tree, _kernel = l40s
    snap, calls = tree.snapshot(), len(commands.calls)
    result, failed = run_module(gpu_host_preflight, ARGS)
    assert not failed, result
    assert tree.snapshot() == snap, "the probe wrote to the host"
    assert not [c for c in commands.calls[calls:] if commands.MUTATING.search(c)], "the probe ran a change"
    assert result["plan"]["fixes"] == ["nouveau", "sriov"]
    assert result["pending"]["acs"] is None and result["pending"]["fabricmanager"] is None  # not planned
    fresh = probe_says(result)
    assert fresh == {"nouveau": (True, True), "sriov": (True, False)}  # nouveau is in use: a reboot after
    assert result["pending"]["reboot_required"] is True  # any fix's: the one flag host_prep records
    assert result["pending"]["any"] is True
    assert result["pending"]["sriov_pending"] == [PF]  # host_prep's sriov loop: the PFs whose VFs would change
    assert fresh == module_says(run_module)
    # the facts it gathered are set for the tasks after it, as gpu_host_facts sets them
    assert [a["model"] for a in result["ansible_facts"]["gpuops_host"]["accelerators"]] == ["NVIDIA L40S"] * 4

    module_says(run_module, check_mode=False)  # the fixes, for real
    again, failed = run_module(gpu_host_preflight, ARGS)
    assert not failed, again
    # nothing left to do; nouveau stays loaded (in use) until the reboot, which the probe passes on
    assert probe_says(again) == {"nouveau": (False, True), "sriov": (False, False)}
    assert again["pending"]["reboot_required"] is True  # nothing pending, still a reboot to make
    assert again["pending"]["any"] is False and again["pending"]["sriov_pending"] == []
    assert probe_says(again) == module_says(run_module)


def test_no_probe_without_the_option_or_at_validation(l40s, commands, run_module):
    plain, _failed = run_module(gpu_host_preflight, {**ARGS, "probe": None})
    assert "pending" not in plain
    validate, _failed = run_module(gpu_host_preflight, {**ARGS, "stage": "validate"})
    assert "pending" not in validate
    given, _failed = run_module(gpu_host_preflight, {**ARGS, "facts": plain["ansible_facts"]["gpuops_host"]})
    assert "ansible_facts" not in given  # facts given: nothing gathered, nothing set


def test_a_probe_that_fails_counts_as_pending(l40s, commands, run_module, monkeypatch):
    """The module then runs and reports the error with its own evidence and fix (here: no initramfs tool)."""
    original = _runner.Runner._resolve
    monkeypatch.setattr(
        _runner.Runner, "_resolve", lambda self, tool: None if tool == "update-initramfs" else original(self, tool)
    )
    result, failed = run_module(gpu_host_preflight, ARGS)
    assert not failed, result
    nv = result["pending"]["nouveau"]
    assert nv["pending"] is True and "update-initramfs" in nv["error"]


@pytest.mark.parametrize("persist", [False, True])
def test_acs_probe_answers_as_pcie_acs_does(l40s, commands, run_module, persist):
    commands.tools |= {"setpci", "systemctl"}
    args = {**ARGS, "sriov": [], "fix": {"nouveau": "skip", "acs": "disable"}, "probe": {"acs_persist": persist}}
    result, failed = run_module(gpu_host_preflight, args)
    assert not failed, result
    assert result["plan"]["acs"] == {"state": "disabled", "devices": []}
    module, failed = run_module(pcie_acs, {"state": "disabled", "persist": persist}, check_mode=True)
    assert not failed, module
    assert result["pending"]["acs"]["pending"] is module["changed"] is True  # the profile's switch ports have ACS on
    assert result["pending"]["acs"]["reboot_required"] is result["pending"]["reboot_required"] is False


def test_validate_options_are_host_preps():
    """probe.validate answers as host_prep's validation asks (roles/host_prep/tasks/validate_check.yml, which
    validate.yml includes): the same options."""
    tasks = yaml.safe_load((REPO / "roles" / "host_prep" / "tasks" / "validate_check.yml").read_text())
    (args,) = [t["gpuops.platform.gpu_host_preflight"] for t in tasks if "gpuops.platform.gpu_host_preflight" in t]
    assert set(args) == {*_preflight.VALIDATION_OPTIONS, "stage", "reboot_pending", "fail_on", "facts"}
    assert args["stage"] == "validate" and args["fail_on"] == "error"


def test_with_nothing_pending_the_validation_is_answered_on_the_same_facts(l40s, commands, run_module):
    args = {**ARGS, "probe": {"validate": True}}
    fresh, failed = run_module(gpu_host_preflight, args)
    assert not failed and "validation" not in fresh  # fixes pending: the host changes before its validation

    module_says(run_module, check_mode=False)  # the fixes, for real
    calls = len(commands.calls)
    again, failed = run_module(gpu_host_preflight, args)
    assert not failed and "validation" in again
    # what host_prep's validation module run would answer on the same facts
    options = {k: args[k] for k in _preflight.VALIDATION_OPTIONS if k in args}
    facts = again["ansible_facts"]["gpuops_host"]
    validate, failed = run_module(
        gpu_host_preflight,
        {**options, "facts": facts, "stage": "validate", "reboot_pending": True, "fail_on": "error"},
    )
    validate.pop("invocation", None)
    want = {k: v for k, v in validate.items() if k not in ("failed", "warnings", "deprecations")}
    assert again["validation"] == want
    # nouveau is still loaded (reboot pending): the validation reports it and still passes, as the module does
    assert again["validation"]["findings"] and again["validation"]["passed"] is (not failed)
    assert not [c for c in commands.calls[calls:] if commands.MUTATING.search(c)]

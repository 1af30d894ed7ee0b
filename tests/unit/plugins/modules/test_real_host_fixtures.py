"""What gpu_host_facts and gpu_host_preflight answered on real GPU machines (tests/fixtures/real-hosts): the rules,
given the captured facts, answer what the module answered there, and the facts follow from the captured evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.common._fs import HostFS
from ansible_collections.gpuops.platform.plugins.module_utils.host import _kmod
from ansible_collections.gpuops.platform.plugins.modules import gpu_host_facts, gpu_host_preflight

REAL = Path(__file__).resolve().parents[3] / "fixtures" / "real-hosts"
# the arguments hack/capture-host-fixtures.sh passed, per file
CAPTURED = {
    "preflight-host-driver.json": {"stage": "preflight", "nvidia_driver": "host", "fail_on": "never"},
    "preflight-container-driver.json": {"stage": "preflight", "nvidia_driver": "container", "fail_on": "never"},
    "validate-host-driver.json": {"stage": "validate", "nvidia_driver": "host", "fail_on": "never"},
}
ANSWER = ("findings", "report", "summary", "plan", "node_labels", "passed", "msg")


def load(machine: str, name: str) -> dict:
    return json.loads((REAL / machine / name).read_text())


def facts(machine: str) -> dict:
    return load(machine, "facts.json")["ansible_facts"]["gpuops_host"]


def evidence(machine: str, command: str) -> str:
    """The output of one command in evidence.txt (### command, then its lines)."""
    text = (REAL / machine / "evidence.txt").read_text()
    return text.split(f"### {command}\n", 1)[1].split("\n### ", 1)[0]


MACHINES = sorted(p.name for p in REAL.iterdir() if p.is_dir())


def test_there_are_captures():
    assert MACHINES == ["h100-vm"]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_the_rules_on_the_captured_facts_answer_as_the_machine_did(machine, name, commands, run_module):
    recorded = load(machine, name)
    args = dict(CAPTURED[name], node_name=recorded["node_name"], facts=facts(machine))
    result, failed = run_module(gpu_host_preflight, args)
    assert not failed
    assert {k: result[k] for k in ANSWER} == {k: recorded[k] for k in ANSWER}
    assert commands.calls == []  # facts given: nothing read


@pytest.mark.parametrize("machine", MACHINES)
def test_the_probe_run_agrees_with_the_plain_preflight_and_the_validation(machine):
    probe, plain, validate = (
        load(machine, n) for n in ("preflight-probe.json", "preflight-host-driver.json", "validate-host-driver.json")
    )
    assert {k: probe[k] for k in ANSWER} == {k: plain[k] for k in ANSWER}
    assert probe["pending"]["any"] is False and probe["pending"]["reboot_required"] is False
    assert {k: probe["validation"][k] for k in ("findings", "passed", "msg")} == {
        k: validate[k] for k in ("findings", "passed", "msg")
    }


def test_h100_vm_the_driver_container_is_refused_on_a_host_with_a_driver():
    ids = {f["id"]: f["severity"] for f in load("h100-vm", "preflight-container-driver.json")["findings"]}
    assert ids == {"nouveau-not-blacklisted": "warning", "host-driver-with-driver-container": "error"}
    gpu = facts("h100-vm")["accelerators"]
    assert [(g["device_id"], g["model"], g["architecture"], g["memory_gb"], g["mig_capable"]) for g in gpu] == [
        ("2330", "NVIDIA H100 80GB HBM3", "Hopper", 80, True)
    ]


def test_h100_vm_proc_modules_of_a_kernel_without_module_unloading(host, commands, run_module):
    """The machine's /proc/modules prints "-" for the reference counts; the driver is loaded all the same."""
    lines = evidence("h100-vm", "cat /proc/modules").splitlines()
    assert lines == [
        "nvidia_uvm 1830912 - - Live 0xffffffffc080c000 (O)",
        "nvidia 14299136 - - Live 0xffffffffc0400000 (O)",
    ]
    host.modules(*lines)
    host.file("/sys/module/nvidia/version", evidence("h100-vm", "cat /sys/module/nvidia/version"))
    fs = HostFS()
    modules = _kmod.loaded_modules(fs)
    assert sorted(modules) == ["nvidia", "nvidia_uvm"] and modules["nvidia"]["refcnt"] is None
    assert _kmod.module_usage(fs, modules, "nvidia")["in_use"] is True
    result, failed = run_module(gpu_host_facts, {})  # the machine has no modinfo: nothing is run for the version
    assert not failed and commands.calls == []
    driver = result["ansible_facts"]["gpuops_host"]["nvidia_driver"]
    assert (driver["loaded"], driver["version"]) == (True, facts("h100-vm")["nvidia_driver"]["version"])

"""gpuops.platform.smoke_tests_pods through main(): the role's pods (owner labels only), and the wait that ends when
the role's rule (_smoke_results.results) says a phase settled - or at the timeout, which is not an error. The reader is
a fake that serves one answer per look."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s, _owned
from ansible_collections.gpuops.platform.plugins.module_utils.status import _readiness
from ansible_collections.gpuops.platform.plugins.modules import smoke_tests_pods

# the plan and pod helpers of the rule's own tables (tests/unit/plugins/module_utils/test_smoke.py)
_spec = importlib.util.spec_from_file_location(
    "smoke_tables", Path(__file__).resolve().parents[1] / "module_utils" / "test_smoke.py"
)
_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tables)
PLAN, TERM, live = _tables.PLAN, _tables.TERM, _tables.live

OWNER = _owned.owner_labels("smoke_tests")


def owned(pod):
    pod["metadata"]["labels"] = dict(OWNER)
    return pod


class FakeReader:
    def __init__(self, looks):
        self.looks, self.calls = looks, 0

    def core(self, plural, namespace):
        assert (plural, namespace) == ("pods", "smoke")
        self.calls += 1
        return self.looks[min(self.calls - 1, len(self.looks) - 1)]


@pytest.fixture
def reader(monkeypatch):
    made = {}

    def install(looks):
        made["reader"] = FakeReader(looks)
        monkeypatch.setattr(_k8s, "new_reader", lambda params: made["reader"])
        monkeypatch.setattr(_k8s, "require_client", lambda module: None)
        monkeypatch.setattr(_readiness.time, "sleep", lambda s: None)
        return made["reader"]

    return install


RUNNING = [
    owned(live("smoke-cuda-nvidia-l40s", "sim-0", "Running")),
    owned(live("smoke-cuda-nvidia-h100-80gb-hbm3", "dgx-0", "Running")),
]
SETTLED = [
    owned(live("smoke-cuda-nvidia-l40s", "sim-0", "Running")),  # a simulated node: nothing more to learn
    owned(live("smoke-cuda-nvidia-h100-80gb-hbm3", "dgx-0", "Succeeded", **TERM)),
]
CUDA_PHASE = 1  # cuda runs first, the NCCL pair after it (_smoke_phases.assign_phases)


def test_without_wait_it_lists_the_roles_pods_only(run_module, reader):
    foreign = live("someone-else", "dgx-0", "Running")
    r = reader([[*RUNNING, foreign]])
    result, failed = run_module(smoke_tests_pods, {"namespace": "smoke"})
    assert not failed, result
    assert [p["metadata"]["name"] for p in result["resources"]] == [p["metadata"]["name"] for p in RUNNING]
    assert result["settled"] is True and r.calls == 1


def test_the_wait_ends_when_the_phase_settled(run_module, reader):
    r = reader([RUNNING, RUNNING, SETTLED])
    result, failed = run_module(
        smoke_tests_pods,
        {"namespace": "smoke", "plan": PLAN, "phase": CUDA_PHASE, "wait": {"timeout": 60, "sleep": 1}},
    )
    assert not failed, result
    assert result["settled"] is True and result["waiting"] == [] and r.calls == 3


def test_a_timeout_is_not_an_error_and_names_the_waiting_pods(run_module, reader):
    reader([RUNNING])
    result, failed = run_module(
        smoke_tests_pods,
        {"namespace": "smoke", "plan": PLAN, "phase": CUDA_PHASE, "wait": {"timeout": 0, "sleep": 1}},
    )
    assert not failed
    assert result["settled"] is False and result["waiting"] == ["smoke-cuda-nvidia-h100-80gb-hbm3"]


def test_check_mode_looks_once(run_module, reader):
    r = reader([RUNNING, SETTLED])
    result, failed = run_module(
        smoke_tests_pods,
        {"namespace": "smoke", "plan": PLAN, "phase": CUDA_PHASE, "wait": {"timeout": 60, "sleep": 1}},
        check_mode=True,
    )
    assert not failed and result["settled"] is False and r.calls == 1


def test_a_wait_without_the_plan_is_refused(run_module, reader):
    reader([RUNNING])
    result, failed = run_module(smoke_tests_pods, {"namespace": "smoke", "wait": {"timeout": 5}})
    assert failed and "wait needs the plan" in result["msg"]

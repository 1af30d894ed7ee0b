"""helm_release_lock through main() with a fake Lease API: taken when free or expired, renewed when ours,
refused naming the holder when another run holds it, released only by its holder, nothing written in check
mode, a write that loses a race looks again; how the Lease was found (a dead run's?) and the chart copies of the
release's earlier runs removed once the Lease is taken."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s
from ansible_collections.gpuops.platform.plugins.module_utils.release import _lease
from ansible_collections.gpuops.platform.plugins.modules import helm_release_lock

NAME = "gpuops-helm-ns.rel"


class Obj:
    def __init__(self, rv):
        self.metadata = type("M", (), {"resource_version": rv})()


class FakeLeases:
    def __init__(self):
        self.spec = None
        self.rv = 0
        self.writes = []
        self.deletes = 0
        self.conflicts = 0
        self.durations = []

    def __call__(self, api_client, namespace):
        assert namespace == "kube-system"
        return self

    def read(self, name):
        assert name == NAME
        return (Obj(str(self.rv)), dict(self.spec)) if self.spec is not None else (None, None)

    def write(self, name, holder, duration, current):
        self.durations.append(duration)
        if self.conflicts:
            self.conflicts -= 1
            raise _k8s.ApiException(status=409, reason="Conflict")
        self.writes.append(holder)
        now = datetime.now(timezone.utc).isoformat()  # noqa: UP017
        self.spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": now, "renewTime": now}
        self.rv += 1

    def delete(self, name, current):
        self.deletes += 1
        self.spec = None


@pytest.fixture
def leases(monkeypatch):
    fake = FakeLeases()
    monkeypatch.setattr(_lease, "Leases", fake)
    monkeypatch.setattr(_k8s, "new_api_client", lambda params: object())
    monkeypatch.setattr(helm_release_lock, "POLL", 0.01)
    return fake


def held_by(holder, ago):
    t = (datetime.now(timezone.utc) - timedelta(seconds=ago)).isoformat()  # noqa: UP017
    return {"holderIdentity": holder, "leaseDurationSeconds": 60, "acquireTime": t, "renewTime": t}


ARGS = {"release": "rel", "namespace": "ns", "holder": "me run 1"}


@pytest.mark.parametrize("check_mode", [True, False])
def test_free_lock_is_taken(run_module, leases, check_mode):
    result, failed = run_module(helm_release_lock, ARGS, check_mode=check_mode)
    assert not failed and result["changed"] and result["lease"] == f"kube-system/{NAME}"
    assert leases.writes == ([] if check_mode else ["me run 1"])


def test_held_lock_fails_naming_the_holder(run_module, leases):
    leases.spec = held_by("alice@bastion run 9", 5)
    result, failed = run_module(helm_release_lock, {**ARGS, "wait": 0})
    assert failed and leases.writes == []
    assert "is being changed by another run" in result["msg"] and "alice@bastion run 9" in result["msg"]
    assert f"kubectl -n kube-system delete lease {NAME}" in result["msg"]


def test_held_lock_in_check_mode_warns_and_writes_nothing(run_module, leases):
    leases.spec = held_by("alice", 5)
    result, failed = run_module(helm_release_lock, ARGS, check_mode=True)
    assert not failed and not result["changed"] and "held by alice" in str(result.get("warnings"))


def test_expired_lock_is_taken_over_and_a_lost_race_looks_again(run_module, leases):
    leases.spec = held_by("dead run", 3600)
    leases.conflicts = 1
    result, failed = run_module(helm_release_lock, ARGS)
    assert not failed and result["changed"] and leases.writes == ["me run 1"]


def test_own_lock_is_renewed_without_change(run_module, leases):
    leases.spec = held_by("me run 1", 5)
    result, failed = run_module(helm_release_lock, ARGS)
    assert not failed and not result["changed"] and leases.writes == ["me run 1"]


@pytest.mark.parametrize(("holder", "deleted"), [("me run 1", 1), ("alice", 0)])
def test_release_deletes_only_its_own_lock(run_module, leases, holder, deleted):
    leases.spec = held_by(holder, 5)
    result, failed = run_module(helm_release_lock, {**ARGS, "state": "released"})
    assert not failed and result["changed"] is bool(deleted) and leases.deletes == deleted


@pytest.mark.parametrize(
    ("spec", "found", "previous"),
    [
        (None, "absent", None),
        (held_by("alice@bastion run 9", 3600), "expired", "alice@bastion run 9"),
        (held_by("", 5), "released", None),
        (held_by("me run 1", 5), "ours", "me run 1"),
    ],
    ids=["absent", "expired", "released", "ours"],
)
@pytest.mark.parametrize("check_mode", [True, False])
def test_how_the_lease_was_found(run_module, leases, spec, found, previous, check_mode):
    leases.spec = spec
    result, failed = run_module(helm_release_lock, ARGS, check_mode=check_mode)
    assert not failed and result["found"] == found and result["previous_holder"] == previous, result
    assert leases.durations == ([] if check_mode else [60])  # short: a dead run's Lease expires in a minute


@pytest.mark.parametrize("check_mode", [True, False])
def test_chart_copies_of_earlier_runs_are_removed_once_the_lease_is_taken(
    run_module, leases, tmp_path, monkeypatch, check_mode
):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in ("gpuops-chart-ns.rel_a1", "gpuops-chart-ns.rel_b2", "gpuops-chart-ns.rel-x_c3", "other"):
        (tmp_path / name / "c").mkdir(parents=True)
    (tmp_path / "gpuops-chart-ns.rel_file").write_text("not a directory")
    result, failed = run_module(helm_release_lock, {**ARGS, "temp_prefix": "gpuops-chart-ns.rel_"}, check_mode)
    assert not failed
    left = sorted(p.name for p in tmp_path.iterdir())
    ours = ["gpuops-chart-ns.rel_a1", "gpuops-chart-ns.rel_b2"]
    assert result["removed"] == [str(tmp_path / n) for n in ours]
    assert left == sorted(
        ["gpuops-chart-ns.rel-x_c3", "other", "gpuops-chart-ns.rel_file"] + (ours if check_mode else [])
    )


def test_nothing_is_removed_while_another_run_holds_the_release(run_module, leases, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "gpuops-chart-ns.rel_a1").mkdir()
    leases.spec = held_by("alice", 5)
    result, failed = run_module(helm_release_lock, {**ARGS, "temp_prefix": "gpuops-chart-ns.rel_"})
    assert failed and (tmp_path / "gpuops-chart-ns.rel_a1").is_dir()

"""gpuops.platform.k8s_apply's ``prune``: apply and prune in one task - the read it makes (the role's kinds, by its
labels), what it deletes (only labelled objects the definition does not hold, in the kinds' order), what it reports
(``pruned``, changed, the deletion's diff), check mode, and the refusals of a bad option, as tables over a fake
cluster (the API calls are the two the action makes: cluster_objects_info and kubernetes.core.k8s)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuops.platform.plugins.action import k8s_apply
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

LABELS = _owned.owner_labels("kueue")
SPEC = _owned.prune_spec(LABELS, [(_kueue.API_VERSION, kind, None) for kind in _kueue.KINDS])


def obj(kind: str, name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS if labels is None else labels)}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": _kueue.API_VERSION, "kind": kind, "metadata": meta, "spec": {}}


class FakeTask:
    def __init__(self, args: dict[str, Any], check_mode: bool = False) -> None:
        self.args = args
        self.check_mode = check_mode
        self.diff = True


class Fake(k8s_apply.ActionModule):
    """The action with its two API calls recorded and answered from ``live``."""

    def __init__(self, args: dict[str, Any], live: list[dict[str, Any]], check_mode: bool = False) -> None:
        self._task = FakeTask(args, check_mode)
        self.live = live
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _execute_module(self, module_name: str = "", module_args: Any = None, task_vars: Any = None, **_: Any) -> Any:
        self.calls.append((module_name, module_args))
        results = []
        for q in module_args["queries"]:
            want = dict(s.split("=") for s in q["label_selectors"][0].split(","))
            results.append(
                {
                    "query": q,
                    "resources": [
                        o
                        for o in self.live
                        if o["kind"] == q["kind"]
                        and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in want.items())
                        and (not q.get("namespace") or o["metadata"].get("namespace") == q["namespace"])
                    ],
                }
            )
        return {"results": results}

    def _run_k8s(self, module: str, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((module, args))
        if args.get("state") == "absent":
            return {"changed": True, "result": {"results": []}, "diff": [{"before": d} for d in args["definition"]]}
        return {"changed": False, "result": {"results": []}}


@pytest.fixture(autouse=True)
def _no_base_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # ActionBase.run's bookkeeping is not under test: the action's own run from there on
    monkeypatch.setattr(k8s_apply.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})


def run(args: dict[str, Any], live: list[dict[str, Any]], check_mode: bool = False) -> tuple[dict[str, Any], Fake]:
    fake = Fake(args, live, check_mode)
    return fake.run(task_vars={}), fake


LQ = obj("LocalQueue", "research", "research")
CQ = obj("ClusterQueue", "research")
RF = obj("ResourceFlavor", "h100")
OLD_LQ = obj("LocalQueue", "old", "old-team")
OLD_CQ = obj("ClusterQueue", "old")
HAND = obj("ClusterQueue", "hand-made", labels={})


@pytest.mark.parametrize(
    ("wanted", "live", "pruned"),
    [
        # nothing dropped: one read, no deletion, no change from the prune
        ([RF, CQ, LQ], [RF, CQ, LQ, HAND], []),
        # a team dropped: its LocalQueue before its ClusterQueue; the hand-made queue is never touched
        ([RF, CQ, LQ], [RF, CQ, LQ, OLD_CQ, OLD_LQ, HAND], ["LocalQueue old-team/old", "ClusterQueue old"]),
        # every object dropped (uninstall's prune: nothing wanted): all labelled ones, in delete order
        ([], [RF, CQ, LQ, HAND], ["LocalQueue research/research", "ClusterQueue research", "ResourceFlavor h100"]),
    ],
)
def test_prune_deletes_the_labelled_objects_the_definition_dropped_in_order(wanted, live, pruned):
    result, fake = run({"definition": wanted, "apply": True, "prune": SPEC}, live)
    assert result["pruned"] == pruned
    assert result["changed"] is bool(pruned)
    modules = [m for m, _args in fake.calls]
    applied = ["kubernetes.core.k8s"] if wanted else []
    deleted = ["kubernetes.core.k8s"] if pruned else []
    assert modules == [*applied, "gpuops.platform.cluster_objects_info", *deleted]
    read = fake.calls[len(applied)][1]["queries"]
    assert [(q["api_version"], q["kind"]) for q in read] == [(_kueue.API_VERSION, k) for k in _kueue.KINDS]
    assert all(q["label_selectors"] == [_owned.selector(LABELS)] for q in read)
    if pruned:
        delete = fake.calls[-1][1]
        assert delete["state"] == "absent" and delete["wait"] is True and delete["wait_timeout"] == 120
        assert "prune" not in delete and "prune" not in (fake.calls[0][1] if wanted else {})
        assert len(result["diff"]) == len(pruned)


def test_the_apply_gets_the_task_options_without_prune():
    _result, fake = run({"definition": [CQ], "apply": True, "kubeconfig": "/k", "prune": SPEC}, [CQ])
    module, args = fake.calls[0]
    assert module == "kubernetes.core.k8s" and "prune" not in args and args["kubeconfig"] == "/k"
    # the read uses the same connection
    assert fake.calls[1][1]["kubeconfig"] == "/k"


def test_a_per_kind_namespace_limits_the_read():
    spec = _owned.prune_spec(LABELS, [("v1", "ConfigMap", "monitoring"), ("v1", "Service", None)])
    cm = {**obj("ConfigMap", "dash", "monitoring"), "apiVersion": "v1"}
    elsewhere = {**obj("ConfigMap", "dash", "other"), "apiVersion": "v1"}
    result, fake = run({"definition": [], "prune": spec}, [cm, elsewhere])
    assert result["pruned"] == ["ConfigMap monitoring/dash"]
    assert [q.get("namespace") for q in fake.calls[0][1]["queries"]] == ["monitoring", None]


def test_a_failed_read_after_the_apply_fails_and_keeps_the_apply_change():
    class Failing(Fake):
        def _execute_module(self, module_name: str = "", module_args: Any = None, task_vars: Any = None, **_: Any):
            return {"failed": True, "msg": "Unauthorized"}

        def _run_k8s(self, module, args, task_vars):
            self.calls.append((module, args))
            return {"changed": True}

    fake = Failing({"definition": [CQ], "prune": SPEC}, [])
    result = fake.run(task_vars={})
    assert result["failed"] is True and result["changed"] is True and "Unauthorized" in result["msg"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"definition": [], "prune": {"kinds": SPEC["kinds"]}}, "prune.labels"),
        ({"definition": [], "prune": {"labels": {}, "kinds": SPEC["kinds"]}}, "prune.labels"),
        ({"definition": [], "prune": {"labels": LABELS, "kinds": []}}, "prune.kinds"),
        ({"definition": [], "prune": {"labels": LABELS, "kinds": [{"kind": "Queue"}]}}, "prune.kinds[0]"),
        ({"definition": [], "prune": {**SPEC, "wait_timeout": -1}}, "prune.wait_timeout"),
        ({"definition": [], "prune": {**SPEC, "selector": "x"}}, "prune.selector: unknown"),
        ({"definition": [], "prune": "yes"}, "prune must be a dict"),
        ({"definition": [], "state": "absent", "prune": SPEC}, "prune needs state present"),
    ],
)
def test_a_bad_prune_option_is_refused_before_any_call(args, words):
    result, fake = run(args, [CQ])
    assert result["failed"] is True and words in result["msg"]
    assert fake.calls == []


def test_check_mode_names_the_objects_and_passes_check_mode_to_the_deletion():
    result, fake = run({"definition": [], "prune": SPEC}, [CQ], check_mode=True)
    assert result["pruned"] == ["ClusterQueue research"]
    # the deletion is kubernetes.core.k8s's own check mode (the task's check_mode travels with the task)
    assert fake.calls[-1][0] == "kubernetes.core.k8s" and fake._task.check_mode is True


def test_the_roles_prune_specs_are_valid_and_in_delete_order():
    from ansible_collections.gpuops.platform.plugins.module_utils.network import _network_owned

    assert SPEC["kinds"][0]["kind"] == "LocalQueue" and SPEC["labels"] == LABELS
    assert [k["kind"] for k in _network_owned.PRUNE["kinds"]][-1] == "IPPool"  # networks before their pools
    for spec in (SPEC, _network_owned.PRUNE):
        assert _owned.prune_spec_errors(spec) == []


UNCALLED = 'Internal error occurred: failed calling webhook "mutatequeue.volcano.sh": Post ...: 502 Bad Gateway'


@pytest.mark.parametrize(
    ("result", "unanswered"),
    [
        ({"failed": True, "msg": f"Failed to apply object: {UNCALLED}"}, True),
        ({"failed": True, "msg": 'admission webhook "validatequeue.volcano.sh" denied the request: ...'}, False),
        ({"failed": True, "msg": "Queue.scheduling.volcano.sh is invalid: spec.weight"}, False),
        ({"changed": True, "msg": UNCALLED}, False),  # not failed
    ],
)
def test_only_a_webhook_the_api_server_could_not_call_is_waited_for(result, unanswered):
    from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _owned

    assert _owned.webhook_unanswered(result) is unanswered


class Flaky(Fake):
    """kubernetes.core.k8s failing with `failures` (one per call) before it applies."""

    def __init__(self, args: dict[str, Any], failures: list[str]) -> None:
        super().__init__(args, [])
        self.failures = failures

    def _run_k8s(self, module: str, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((module, args))
        if self.failures:
            return {"failed": True, "msg": self.failures.pop(0)}
        return {"changed": True, "result": {"results": []}}


def test_webhook_wait_tries_again_while_the_webhook_is_not_answered(monkeypatch):
    monkeypatch.setattr(k8s_apply.time, "sleep", lambda s: None)
    fake = Flaky({"definition": [CQ], "webhook_wait": "30"}, [UNCALLED, UNCALLED])
    result = fake.run(task_vars={})
    assert result.get("changed") is True and not result.get("failed") and len(fake.calls) == 3
    assert "webhook_wait" not in fake.calls[-1][1]  # not passed on to kubernetes.core.k8s


@pytest.mark.parametrize(
    ("wait", "failures", "calls"),
    [
        (30, ["admission webhook denied the request"], 1),  # a refusal: at once
        (0, [UNCALLED], 1),  # no wait: one try
    ],
)
def test_webhook_wait_ends_at_once_on_anything_else(monkeypatch, wait, failures, calls):
    monkeypatch.setattr(k8s_apply.time, "sleep", lambda s: None)
    fake = Flaky({"definition": [CQ], "webhook_wait": wait}, list(failures))
    result = fake.run(task_vars={})
    assert result["failed"] is True and len(fake.calls) == calls

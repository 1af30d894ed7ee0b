"""helm_release_apply through main(): the plan decides (no helm-diff), check mode runs no mutating helm command
and shows the manifest diff, an unchanged release is not upgraded, a failed upgrade reports changed and the
next run upgrades again, a release a dead run left pending is rolled back (or uninstalled) and then applied with a
warning, and the run's Lease is renewed while helm runs and given back when the run that took it has died."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.platform.plugins.modules import helm_release_apply

META = {"name": "r", "chart": "c", "version": "1.0.0", "revision": 1, "status": "deployed"}


@pytest.fixture
def chart(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    (d / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    return str(d)


@pytest.fixture
def helm(commands):
    commands.tools.add("helm")
    state = {"meta": dict(META), "values": {"replicas": 1}}

    def metadata(argv):
        return (0, json.dumps(state["meta"]), "") if state["meta"] else (1, "", "Error: release: not found")

    commands.on(r"^helm get metadata", metadata)
    commands.on(r"^helm get values", lambda argv: (0, json.dumps(state["values"]), ""))
    commands.on(r"^helm get manifest", (0, "kind: Deployment\nspec:\n  replicas: 1\n", ""))
    commands.on(r"^helm template", (0, "kind: Deployment\nspec:\n  replicas: 2\n", ""))
    return state


def args(chart, **kw):
    return {"name": "r", "namespace": "ns", "chart_path": chart, "kubeconfig": "/k", **kw}


def upgrades(commands):
    return [c for c in commands.calls if c.startswith(("helm upgrade", "helm uninstall", "helm rollback"))]


def test_unchanged_release_is_not_upgraded(run_module, commands, helm, chart):
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 1}))
    assert not failed and result["changed"] is False and result["reasons"] == [] and result["revision"] == 1
    assert upgrades(commands) == [] and not [c for c in commands.calls if c.startswith("helm template")]


@pytest.mark.parametrize("check_mode", [True, False])
def test_values_change_shows_the_manifest_diff(run_module, commands, helm, chart, check_mode):
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 2}), check_mode=check_mode)
    assert not failed and result["changed"] is True, result
    assert result["reasons"] == ["values differ at replicas"]
    assert "replicas: 1" in result["diff"]["before"] and "replicas: 2" in result["diff"]["after"]
    assert "--is-upgrade" in next(c for c in commands.calls if c.startswith("helm template"))
    if check_mode:
        assert upgrades(commands) == []
    else:
        (cmd,) = upgrades(commands)
        assert cmd.startswith("helm upgrade --install r " + chart) and "--skip-crds --wait --timeout 600s" in cmd
        assert "--namespace ns --kubeconfig /k" in cmd


def test_values_reach_helm_on_stdin_never_in_a_file(run_module, commands, helm, chart, tmp_path, monkeypatch):
    """The values (which may hold what a user put there) are never written to disk, where a killed run leaves them."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 2, "token": "s3cr3t"}))
    assert not failed and result["changed"] is True, result
    sent = {c.split(" ")[1]: d for c, d in zip(commands.calls, commands.stdin, strict=True) if c.startswith("helm ")}
    assert json.loads(sent["template"]) == json.loads(sent["upgrade"]) == {"replicas": 2, "token": "s3cr3t"}
    assert "--values -" in next(c for c in commands.calls if c.startswith("helm upgrade"))
    written = [p for p in (tmp_path / "tmp").rglob("*") if p.is_file() and "s3cr3t" in p.read_text(errors="replace")]
    assert written == []


def test_a_failed_upgrade_reports_changed_and_the_rerun_upgrades(run_module, commands, helm, chart):
    commands.on(r"^helm upgrade", (1, "", "Error: context deadline exceeded"))
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 2}))
    assert failed and result["changed"] is True and "the next run finishes the job" in result["msg"], result
    # helm left revision 2 failed with the new values: the plan still upgrades it
    helm["meta"].update(revision=2, status="failed")
    helm["values"] = {"replicas": 2}
    commands.handlers.pop(0)
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 2}))
    assert (
        not failed
        and result["changed"] is True
        and result["reasons"] == ["the last revision (2) is failed, not deployed"]
    )


def test_install_and_uninstall(run_module, commands, helm, chart):
    helm["meta"] = None
    result, failed = run_module(helm_release_apply, args(chart), check_mode=True)
    assert not failed and result["changed"] and result["reasons"] == ["the release is not installed"]
    assert result["diff"]["before"] == "" and upgrades(commands) == []
    result, failed = run_module(helm_release_apply, args(chart, state="absent"))
    assert not failed and result["changed"] is False and upgrades(commands) == []
    helm["meta"] = dict(META)
    result, failed = run_module(helm_release_apply, args(chart, state="absent"), check_mode=True)
    assert result["changed"] and upgrades(commands) == []
    result, failed = run_module(helm_release_apply, args(chart, state="absent"))
    assert result["changed"] and upgrades(commands) == [
        "helm uninstall r --wait --timeout 600s --namespace ns --kubeconfig /k"
    ]


def test_uninstall_without_the_charts_delete_hooks(run_module, commands, helm, chart):
    """uninstall_hooks false: helm uninstall --no-hooks (the sriov_network_operator role has done what the SR-IOV
    chart's pre-delete Job does, and that Job's pod takes no tolerations); check mode still runs nothing."""
    helm["meta"] = dict(META)
    result, failed = run_module(helm_release_apply, args(chart, state="absent", uninstall_hooks=False), check_mode=True)
    assert not failed and result["changed"] and upgrades(commands) == []
    result, failed = run_module(helm_release_apply, args(chart, state="absent", uninstall_hooks=False))
    assert (
        not failed
        and result["changed"]
        and upgrades(commands) == ["helm uninstall r --wait --timeout 600s --no-hooks --namespace ns --kubeconfig /k"]
    )


def test_a_helm_error_other_than_not_found_names_the_release(run_module, commands, helm, chart):
    commands.on(r"^helm get metadata", (1, "", "Error: Kubernetes cluster unreachable"))
    result, failed = run_module(helm_release_apply, args(chart))
    assert failed and result["msg"].startswith("cannot read release ns/r: Error: Kubernetes cluster unreachable")


# ------------------------------------------------------------------------------------------------ a killed run

HOLDER = "gpuops.platform alice@bastion pid 4242 started 2026-11-27T10:00:00Z"
DEAD = "gpuops.platform bob@bastion pid 77 started 2026-11-27T09:00:00Z"


class FakeLeases:
    """One Lease, held by HOLDER unless a test says otherwise."""

    def __init__(self):
        self.holder = HOLDER
        self.renewals = []
        self.given_back = 0

    def __call__(self, api_client, namespace):
        assert namespace == "kube-system"
        return self

    def renew(self, name, holder, duration):
        assert name == "gpuops-helm-ns.r"
        self.renewals.append((holder, duration))
        return holder == self.holder

    def give_back(self, name, holder):
        self.given_back += 1
        return True


@pytest.fixture
def leases(monkeypatch):
    from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s
    from ansible_collections.gpuops.platform.plugins.module_utils.release import _lease

    fake = FakeLeases()
    monkeypatch.setattr(_lease, "Leases", fake)
    monkeypatch.setattr(_k8s, "new_api_client", lambda params: object())
    monkeypatch.setattr(_lease, "run_alive_check", lambda holder: None)
    return fake


def lock(found, previous=DEAD):
    return {"holder": HOLDER, "found": found, "previous_holder": previous}


def history(helm, commands, *statuses):
    rows = [{"revision": i, "status": st, "chart": "c-1.0.0"} for i, st in enumerate(statuses, 1)]
    commands.on(r"^helm history r -o json", (0, json.dumps(rows), ""))
    helm["meta"].update(revision=len(rows), status=statuses[-1])


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_release_a_dead_run_left_pending_upgrade_is_rolled_back_then_upgraded(
    run_module, commands, helm, chart, leases, check_mode
):
    history(helm, commands, "superseded", "deployed", "pending-upgrade")

    def rollback(argv):
        helm["meta"].update(revision=4, status="deployed")
        return (0, "Rollback was a success!", "")

    commands.on(r"^helm rollback", rollback)
    result, failed = run_module(
        helm_release_apply, args(chart, values={"replicas": 2}, lock=lock("expired")), check_mode
    )
    assert not failed and result["changed"] is True, result
    assert result["reasons"][0] == (
        f"revision 3 is pending-upgrade, left by a run that ended ({DEAD}; its Lease expired): roll back to revision 2"
    )
    if check_mode:
        assert upgrades(commands) == [] and leases.renewals == []
        return
    rb, up = upgrades(commands)
    assert rb == "helm rollback r 2 --wait --timeout 600s --namespace ns --kubeconfig /k"
    assert up.startswith("helm upgrade --install r ")
    warning = str(result["warnings"])
    assert "release ns/r was pending-upgrade at revision 3" in warning and DEAD in warning
    assert "rolled back to revision 2" in warning
    assert leases.renewals[0] == (HOLDER, 60)  # still ours before anything is changed


def test_a_release_whose_install_was_killed_is_uninstalled_then_installed(run_module, commands, helm, chart, leases):
    history(helm, commands, "pending-install")

    def uninstall(argv):
        helm["meta"] = None
        return (0, "release uninstalled", "")

    commands.on(r"^helm uninstall", uninstall)
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 2}, lock=lock("absent", None)))
    assert not failed and result["changed"] is True, result
    un, up = upgrades(commands)
    assert un == "helm uninstall r --wait --timeout 600s --namespace ns --kubeconfig /k"
    assert up.startswith("helm upgrade --install r ")
    assert "no revision was ever deployed: uninstalled it" in str(result["warnings"])
    assert "no Lease held it" in str(result["warnings"])


def test_a_killed_install_is_uninstalled_without_hooks_when_the_caller_says_so(
    run_module, commands, helm, chart, leases
):
    history(helm, commands, "pending-install")

    def uninstall(argv):
        helm["meta"] = None
        return (0, "release uninstalled", "")

    commands.on(r"^helm uninstall", uninstall)
    params = args(chart, values={"replicas": 2}, lock=lock("absent", None), uninstall_hooks=False)
    result, failed = run_module(helm_release_apply, params)
    assert not failed and result["changed"] is True, result
    assert upgrades(commands)[0] == "helm uninstall r --wait --timeout 600s --no-hooks --namespace ns --kubeconfig /k"


@pytest.mark.parametrize("lock_arg", [None, lock("ours", HOLDER)], ids=["no-lock", "lease-held-by-this-run"])
def test_a_pending_release_no_lease_shows_over_is_refused_naming_it(
    run_module, commands, helm, chart, leases, lock_arg
):
    history(helm, commands, "deployed", "pending-upgrade")
    extra = {"lock": lock_arg} if lock_arg else {}
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 2}, **extra))
    assert failed and upgrades(commands) == [] and result["changed"] is False
    assert result["msg"].startswith("release ns/r is pending-upgrade (revision 2)"), result["msg"]
    assert "helm rollback -n ns r 1" in result["msg"]


def test_a_run_that_lost_its_lease_changes_nothing(run_module, commands, helm, chart, leases):
    leases.holder = "gpuops.platform carol@ci pid 9 started 2026-11-27T11:00:00Z"
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 2}, lock=lock("absent", None)))
    assert failed and upgrades(commands) == [] and result["changed"] is False
    assert "no longer holds the Lease kube-system/gpuops-helm-ns.r" in result["msg"]


def test_the_lease_is_renewed_while_helm_runs(run_module, commands, helm, chart, leases, monkeypatch):
    import time

    from ansible_collections.gpuops.platform.plugins.module_utils.release import _lease

    monkeypatch.setattr(_lease, "KEEPER_POLL", 0.01)
    commands.on(r"^helm upgrade", lambda argv: (time.sleep(0.7), (0, "", ""))[1])
    result, failed = run_module(
        helm_release_apply, args(chart, values={"replicas": 2}, lock={**lock("absent"), "duration": 1})
    )
    assert not failed and result["changed"], result
    assert len(leases.renewals) >= 3, leases.renewals  # one before the change, then every quarter of the duration


def test_when_the_run_died_helm_is_stopped_and_the_lease_given_back(
    run_module, commands, helm, chart, leases, monkeypatch
):
    import time

    from ansible_collections.gpuops.platform.plugins.module_utils.release import _lease

    monkeypatch.setattr(_lease, "KEEPER_POLL", 0.01)
    monkeypatch.setattr(_lease, "run_alive_check", lambda holder: lambda: False)
    commands.on(r"^helm upgrade", lambda argv: (time.sleep(0.3), (1, "", "Error: context canceled"))[1])
    result, failed = run_module(helm_release_apply, args(chart, values={"replicas": 2}, lock=lock("absent")))
    assert failed and result["changed"] is True
    assert f"the run that took the release's Lease ({HOLDER}) has ended" in result["msg"], result["msg"]
    assert leases.given_back == 1


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_values_change_with_the_same_manifest_shows_the_values_diff(run_module, commands, helm, chart, check_mode):
    """A values change that renders the same manifest (a value no template reads) is still an upgrade (the release
    records the new values: a new revision); its diff says so instead of two equal manifests (issue 27)."""
    same = "kind: Deployment\nspec:\n  replicas: 1\n"
    helm["values"] = {"replicas": 1, "unused": "a"}
    commands.on(r"^helm template", (0, same, ""))  # the deployed manifest, rendered again
    result, failed = run_module(
        helm_release_apply, args(chart, values={"replicas": 1, "unused": "b"}), check_mode=check_mode
    )
    assert not failed and result["changed"] is True, result
    assert result["reasons"] == ["values differ at unused"]
    diff = result["diff"]
    assert diff["before"] != diff["after"], "changed with an empty diff"
    assert "unused" in diff["before"] and "unused" in diff["after"]
    assert "same" in diff["after_header"]  # says that the rendered manifest does not change


AGGREGATED = """kind: ClusterRole
metadata: {name: r-batch-admin-role}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {rbac.example/batch-admin: "true"}}]
---
kind: ClusterRole
metadata: {name: r-queue-editor, labels: {rbac.example/batch-admin: "true"}}
rules: []
"""


class _Rbac:
    """ClusterRoles by name; delete records the UID precondition."""

    def __init__(self, roles):
        self.roles = roles
        self.deleted = []

    def read_cluster_role(self, name):
        from types import SimpleNamespace

        from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s

        if name not in self.roles:
            raise _k8s.ApiException(status=404, reason="Not Found")
        uid, annotations = self.roles[name]
        return SimpleNamespace(metadata=SimpleNamespace(uid=uid, annotations=annotations))

    def delete_cluster_role(self, name, body):
        self.deleted.append((name, body["preconditions"]["uid"]))
        self.roles.pop(name)


OWNED = {"meta.helm.sh/release-name": "r", "meta.helm.sh/release-namespace": "ns"}


def test_uninstall_deletes_the_releases_aggregated_cluster_roles_first(run_module, commands, helm, chart, monkeypatch):
    """An aggregated ClusterRole uninstalled with the roles it aggregates comes back (kube-controller-manager applies
    its rules with no UID precondition): the module deletes the release's own first, alone, and waits."""
    commands.on(r"^helm get manifest", (0, AGGREGATED, ""))
    rbac = _Rbac({"r-batch-admin-role": ("uid-1", OWNED), "r-queue-editor": ("uid-2", OWNED)})
    monkeypatch.setattr(helm_release_apply, "_rbac", lambda p: rbac)
    result, failed = run_module(helm_release_apply, args(chart, state="absent"), check_mode=True)
    assert not failed and result["changed"] and rbac.deleted == [] and upgrades(commands) == []
    result, failed = run_module(helm_release_apply, args(chart, state="absent"))
    assert not failed and result["changed"], result
    assert rbac.deleted == [("r-batch-admin-role", "uid-1")]  # only the aggregate, with its UID
    assert any("r-batch-admin-role" in r for r in result["reasons"])
    assert upgrades(commands) == ["helm uninstall r --wait --timeout 600s --namespace ns --kubeconfig /k"]


def test_an_aggregated_role_another_release_owns_is_left_alone():
    rbac = _Rbac({"r-batch-admin-role": ("uid-1", {"meta.helm.sh/release-name": "other"})})
    assert helm_release_apply._delete_cluster_roles(rbac, ["r-batch-admin-role", "gone"], "r", "ns") == []
    assert rbac.deleted == []

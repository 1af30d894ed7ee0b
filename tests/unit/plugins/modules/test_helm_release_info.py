"""helm_release_info through main(): read-only, the same plan as helm_release_apply (so an unchanged release
costs the role one task), the namespace labels read through the Kubernetes client, errors that name the
release."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.release import _helm_release
from ansible_collections.gpuops.platform.plugins.modules import helm_release_info

META = {"name": "r", "chart": "c", "version": "1.0.0", "revision": 3, "status": "deployed"}
PSA = {"pod-security.kubernetes.io/enforce": "privileged"}


@pytest.fixture
def helm(commands):
    commands.tools.add("helm")
    state = {"meta": dict(META), "values": {"replicas": 1}}

    def metadata(argv):
        return (0, json.dumps(state["meta"]), "") if state["meta"] else (1, "", "Error: release: not found")

    commands.on(r"^helm get metadata", metadata)
    commands.on(r"^helm get values", lambda argv: (0, json.dumps(state["values"]), ""))
    return state


@pytest.fixture
def namespace(monkeypatch):
    """The release namespace's labels as the Kubernetes client would read them (None: no namespace)."""
    state = {"labels": dict(PSA)}
    monkeypatch.setattr(helm_release_info, "_namespace_labels", lambda ctx: state["labels"])
    return state


def args(**kw):
    return {"name": "r", "namespace": "ns", "chart_name": "c", "chart_version": "1.0.0", "kubeconfig": "/k", **kw}


@pytest.mark.parametrize(
    ("meta", "values", "ask", "reasons"),
    [
        ({}, {"replicas": 1}, {"values": {"replicas": 1}}, []),
        ({}, {"replicas": 1}, {"values": {"replicas": 2}}, ["values differ at replicas"]),
        ({}, {}, {"values": {}}, []),
        ({"version": "0.9.0"}, {}, {}, ["chart c-0.9.0 is installed, c-1.0.0 is asked for"]),
        ({"status": "failed"}, {}, {}, ["the last revision (3) is failed, not deployed"]),
        (None, None, {}, ["the release is not installed"]),
    ],
)
@pytest.mark.parametrize("check_mode", [False, True])
def test_the_plan_is_the_one_helm_release_apply_uses(
    run_module, commands, helm, meta, values, ask, reasons, check_mode
):
    helm["meta"] = None if meta is None else {**META, **meta}
    helm["values"] = values
    result, failed = run_module(helm_release_info, args(**ask), check_mode=check_mode)
    assert not failed and result["changed"] is False, result
    assert result["reasons"] == reasons and result["up_to_date"] is (not reasons)
    assert result["release"] == "ns/r"
    # the evidence a later validation of the release takes: only a deployed, up-to-date release is verified
    assert result["verified"] == ("" if reasons else "ns/r")
    assert result["chart"] == (None if meta is None else f"c-{helm['meta']['version']}")
    assert all(c.startswith("helm get ") and c.endswith("--namespace ns --kubeconfig /k") for c in commands.calls)


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        (dict(PSA), None),
        ({**PSA, "team": "gpu"}, None),
        (
            {"pod-security.kubernetes.io/enforce": "baseline"},
            "namespace ns lacks label(s) pod-security.kubernetes.io/enforce=privileged",
        ),
        ({}, "namespace ns lacks label(s) pod-security.kubernetes.io/enforce=privileged"),
        (None, "namespace ns does not exist"),
    ],
)
def test_namespace_labels_are_part_of_up_to_date(run_module, helm, namespace, labels, reason):
    namespace["labels"] = labels
    result, failed = run_module(helm_release_info, args(values={"replicas": 1}, namespace_labels=PSA))
    assert not failed
    assert result["reasons"] == ([] if reason is None else [reason]) and result["up_to_date"] is (reason is None)


def test_namespace_is_not_read_without_namespace_labels(run_module, helm, monkeypatch):
    def boom(ctx):
        raise AssertionError("the namespace was read")

    monkeypatch.setattr(helm_release_info, "_namespace_labels", boom)
    result, failed = run_module(helm_release_info, args(values={"replicas": 1}))
    assert not failed and result["up_to_date"] is True


def test_a_helm_error_names_the_release(run_module, commands, helm):
    commands.on(r"^helm get metadata", (1, "", "Error: Kubernetes cluster unreachable"))
    result, failed = run_module(helm_release_info, args())
    assert failed and result["msg"].startswith("cannot read release ns/r: Error: Kubernetes cluster unreachable")


@pytest.mark.parametrize(
    ("have", "want", "expect"),
    [
        ({"a": "1"}, {"a": "1"}, []),
        ({"a": "1"}, {"a": 1}, []),  # label values are strings; the asked value is compared as one
        ({"a": "2", "b": "x"}, {"a": "1", "c": "y"}, ["namespace n lacks label(s) a=1, c=y"]),
        (None, {"a": "1"}, ["namespace n does not exist"]),
        ({}, {}, []),
    ],
)
def test_namespace_label_reasons(have, want, expect):
    assert _helm_release.namespace_label_reasons("n", have, want) == expect


@pytest.mark.parametrize(
    ("installed", "labels", "namespace_gone", "reasons"),
    [
        (False, None, True, []),  # removed: not installed, namespace deleted (the purge's last step)
        (False, {}, False, []),  # without purge the namespace stays: gone once uninstalled
        (False, {}, True, ["namespace ns still exists"]),  # a purge that stopped after the uninstall
        (True, {}, True, ["release ns/r is installed (revision 3)", "namespace ns still exists"]),
        (True, None, False, ["release ns/r is installed (revision 3)"]),
    ],
)
def test_absent_says_whether_the_release_is_gone(
    run_module, commands, helm, namespace, installed, labels, namespace_gone, reasons
):
    helm["meta"] = dict(META) if installed else None
    namespace["labels"] = labels
    # the values and namespace labels are not compared when the release is to be removed
    result, failed = run_module(
        helm_release_info,
        args(state="absent", namespace_gone=namespace_gone, values={"other": 1}, namespace_labels=PSA),
    )
    assert not failed and result["changed"] is False
    assert result["reasons"] == reasons and result["up_to_date"] is (not reasons) and result["state"] == "absent"
    assert result["verified"] == ""  # a release gone is nothing a validation of it could take as evidence
    assert not any(c.startswith("helm get values") for c in commands.calls)


def test_absent_without_namespace_gone_reads_no_namespace(run_module, helm, monkeypatch):
    def boom(ctx):
        raise AssertionError("the namespace was read")

    helm["meta"] = None
    monkeypatch.setattr(helm_release_info, "_namespace_labels", boom)
    result, failed = run_module(helm_release_info, args(state="absent", namespace_labels=PSA))
    assert not failed and result["up_to_date"] is True


@pytest.mark.parametrize(
    ("copies", "lease", "reasons"),
    [
        ([], None, []),
        (["gpuops-chart-ns.r_a1"], None, ["a chart copy that a stopped run left: {tmp}/gpuops-chart-ns.r_a1"]),
        (
            [],
            "gpuops.platform bob@b pid 7 started T",
            [
                "Lease kube-system/gpuops-helm-ns.r is held by gpuops.platform bob@b pid 7 started T (a run changing "
                "the release, or one that was killed)"
            ],
        ),
        (["gpuops-chart-ns.r-x_b2"], None, []),  # another release's copy
    ],
    ids=["clean", "copy-left", "lease-left", "other-release"],
)
def test_what_a_killed_run_left_sends_the_role_down_the_release_path(
    run_module, commands, helm, namespace, monkeypatch, tmp_path, copies, lease, reasons
):
    """After a run killed once helm had finished, the release is deployed as asked, but its Lease and its chart copy
    are left: only the release path (which takes the Lease) may remove them."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in copies:
        (tmp_path / name).mkdir()
    monkeypatch.setattr(helm_release_info, "_lease_holder", lambda ctx, name: (lease is not None, lease))
    extra = {"values": {"replicas": 1}, "lock_namespace": "kube-system", "temp_prefix": "gpuops-chart-ns.r_"}
    result, failed = run_module(helm_release_info, args(**extra))
    assert not failed and result["reasons"] == [r.format(tmp=tmp_path) for r in reasons], result
    assert result["up_to_date"] is not reasons


@pytest.mark.parametrize(
    ("name", "namespace", "caller", "words"),
    [
        (
            "Bad_Name",
            "ns",
            "nfd",
            ["nfd: [release-name-invalid]", "helm_release_name", "Bad_Name", "Nothing was changed"],
        ),
        ("r" * 54, "ns", "kueue", ["kueue:", "longer than 53 characters"]),
        ("r", "Not-A-Label", "monitoring", ["monitoring: [name-invalid]", "helm_release_namespace", "Not-A-Label"]),
        ("r", "ns", "", ["is internal", "use the nfd, gpu_operator"]),
    ],
)
def test_the_caller_names_are_judged_before_anything_is_read(
    run_module, commands, helm, name, namespace, caller, words
):
    result, failed = run_module(helm_release_info, args(name=name, namespace=namespace, caller=caller))
    assert failed, result
    assert all(w in result["msg"] for w in words), result["msg"]
    assert commands.calls == []  # helm never ran


def test_good_names_with_a_caller_read_the_release(run_module, helm):
    result, failed = run_module(helm_release_info, args(caller="nfd", values={"replicas": 1}))
    assert not failed and result["up_to_date"] is True, result


@pytest.mark.parametrize(
    ("meta", "words"),
    [
        (
            {"status": "failed"},
            ["nfd: release ns/r is failed with chart c-1.0.0; expected c-1.0.0 deployed", "helm history -n ns r"],
        ),
        ({"version": "0.9.0"}, ["is deployed with chart c-0.9.0; expected c-1.0.0 deployed"]),
        (None, ["release ns/r is not installed with chart none; expected c-1.0.0 deployed"]),
    ],
)
def test_require_deployed_fails_naming_the_release_and_its_state(run_module, helm, meta, words):
    helm["meta"] = None if meta is None else {**META, **meta}
    result, failed = run_module(helm_release_info, args(caller="nfd", require_deployed=True))
    assert failed, result
    assert all(w in result["msg"] for w in words), result["msg"]


def test_require_deployed_passes_a_deployed_release_whatever_its_values(run_module, helm):
    helm["values"] = {"replicas": 5}
    result, failed = run_module(helm_release_info, args(caller="nfd", require_deployed=True, values={"replicas": 1}))
    assert not failed and result["reasons"] == ["values differ at replicas"], result

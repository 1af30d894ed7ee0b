"""The upstream charts the lab's chart repository serves in place of a fixture (issue 27 §6, hack/gpuops_lab/charts.py),
rendered with the real helm from the lab's build cache (hack/cluster/build.sh copies them out of their Go module zips;
a missing one fails, naming the build step): what the roles set is what upstream reads. Node Feature Discovery v0.19.0
(deployment/helm/node-feature-discovery): the nfd role's values against its values.schema.json and templates. The SR-IOV
Network Operator v1.6.0 (deployment/sriov-network-operator-chart): the sriov_network_operator role's values, what the
chart creates (and what it leaves to the operator: webhooks, the SriovOperatorConfig) and its pre-delete hook Job."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
KWOK = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}


def _lab():
    from gpuops_lab.config import LabConfig

    return LabConfig.load()


@pytest.fixture(scope="module")
def nfd_chart() -> Path:
    cfg = _lab()
    chart = cfg.upstream_chart_dir("node-feature-discovery")
    if not (chart / "Chart.yaml").is_file() or not cfg.binary("helm").is_file():
        # a failure, never a skip: `make test` builds it first, and a skip would hide the chart the lab serves
        pytest.fail(f"the upstream NFD chart is not in {chart}: run `make build` (hack/cluster/build.sh nfd-chart)")
    return chart


def _render(chart: Path, values: dict, release: str = "node-feature-discovery") -> list[dict]:
    argv = [str(_lab().binary("helm")), "template", release, str(chart), "--namespace", "nfd", "--values", "-"]
    r = subprocess.run(argv, input=json.dumps(values), capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def _one(docs: list[dict], kind: str, name: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _role_values() -> dict:
    """The nfd role's default values with the lab inventory's user values (tolerations of the kwok taint)."""
    values = yaml.safe_load((REPO / "roles/nfd/defaults/main.yml").read_text())["nfd_default_values"]
    for component in ("master", "worker", "gc"):
        values.setdefault(component, {})["tolerations"] = [KWOK]
    return values


def test_upstream_chart_version_is_the_placeholder_the_lab_repackages(nfd_chart):
    """Upstream's Chart.yaml in git says 0.2.1: the lab packages it with --version 0.19.0 as upstream's release does."""
    meta = yaml.safe_load((nfd_chart / "Chart.yaml").read_text())
    assert (meta["name"], meta["version"], meta["appVersion"]) == ("node-feature-discovery", "0.2.1", "v0.19.0")


def test_nfd_role_values_render_on_the_upstream_chart(nfd_chart):
    docs = _render(nfd_chart, _role_values())
    workloads = {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in ("Deployment", "DaemonSet", "Job")}
    assert workloads == {
        ("Deployment", "node-feature-discovery-master"),
        ("Deployment", "node-feature-discovery-gc"),
        ("DaemonSet", "node-feature-discovery-worker"),
        ("Job", "node-feature-discovery-prune"),  # the post-delete hook (postDeleteCleanup: true)
    }
    # the nfd role's validate waits on the release's workloads by this label
    for kind, name in workloads - {("Job", "node-feature-discovery-prune")}:
        assert _one(docs, kind, name)["metadata"]["labels"]["app.kubernetes.io/instance"] == "node-feature-discovery"
    worker = yaml.safe_load(_one(docs, "ConfigMap", "node-feature-discovery-worker-conf")["data"]["nfd-worker.conf"])
    assert worker == {
        "sources": {
            "pci": {
                "deviceClassWhitelist": ["02", "0200", "0207", "0300", "0302", "12"],
                "deviceLabelFields": ["vendor"],
            }
        }
    }
    master = yaml.safe_load(_one(docs, "ConfigMap", "node-feature-discovery-master-conf")["data"]["nfd-master.conf"])
    assert master == {"extraLabelNs": ["nvidia.com", "amd.com"]}
    for kind, name in (("DaemonSet", "node-feature-discovery-worker"), ("Deployment", "node-feature-discovery-master")):
        assert KWOK in _one(docs, kind, name)["spec"]["template"]["spec"]["tolerations"]


def test_upstream_post_delete_job_runs_where_the_master_may(nfd_chart):
    """The prune Job (a post-delete hook `helm uninstall` waits for) takes the master's tolerations and node selector:
    the lab's nodes are tainted, so the role's master tolerations are what lets it schedule and complete under kwok."""
    docs = _render(nfd_chart, _role_values())
    job = _one(docs, "Job", "node-feature-discovery-prune")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-delete"
    spec = job["spec"]["template"]["spec"]
    assert spec["tolerations"] == [KWOK] and spec["restartPolicy"] == "Never"
    assert spec["containers"][0]["args"] == ["-prune"]
    assert not [d for d in _render(nfd_chart, {"postDeleteCleanup": False}) if d["kind"] == "Job"]


def test_upstream_values_schema_checks_types_not_key_names(nfd_chart):
    """values.schema.json is upstream's (the fixture had none): a value of the wrong type fails the render; an unknown
    key does not (no additionalProperties: false), so the role's own check of user value keys stays needed."""
    helm = str(_lab().binary("helm"))

    def run(values: dict) -> subprocess.CompletedProcess[str]:
        argv = [helm, "template", "x", str(nfd_chart), "--values", "-"]
        return subprocess.run(argv, input=json.dumps(values), capture_output=True, text=True, check=False)

    r = run({"postDeleteCleanup": "yes"})
    assert r.returncode != 0 and "/postDeleteCleanup" in r.stderr
    assert run({"wroker": {}}).returncode == 0


def test_upstream_nfd_crds(nfd_chart):
    docs = [d for d in yaml.safe_load_all((nfd_chart / "crds" / "nfd-api-crds.yaml").read_text()) if d]
    assert {d["spec"]["names"]["kind"]: (d["spec"]["group"], d["spec"]["scope"]) for d in docs} == {
        "NodeFeature": ("nfd.k8s-sigs.io", "Namespaced"),
        "NodeFeatureGroup": ("nfd.k8s-sigs.io", "Namespaced"),
        "NodeFeatureRule": ("nfd.k8s-sigs.io", "Cluster"),
    }


# ------------------------------------------------------------------------------------------ SR-IOV Network Operator
SRIOV_RELEASE = "sriov-network-operator"  # the role's release name and namespace (roles/sriov_network_operator)


@pytest.fixture(scope="module")
def sriov_chart() -> Path:
    cfg = _lab()
    chart = cfg.upstream_chart_dir("sriov-network-operator-chart")
    if not (chart / "Chart.yaml").is_file() or not cfg.binary("helm").is_file():
        # a failure, never a skip: `make test` builds it first, and a skip would hide the chart the lab serves
        pytest.fail(
            f"the upstream SR-IOV chart is not in {chart}: run `make build` (hack/cluster/build.sh sriov-chart)"
        )
    return chart


def _sriov_render(chart: Path, values: dict) -> list[dict]:
    argv = [str(_lab().binary("helm")), "template", SRIOV_RELEASE, str(chart), "--namespace", SRIOV_RELEASE]
    r = subprocess.run([*argv, "--values", "-"], input=json.dumps(values), capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def _sriov_role_values(user: dict | None = None) -> dict:
    """The role's chart values (plugins/filter/sriov_network_operator_objects.py) with user values merged over them,
    as roles/sriov_network_operator/tasks/main.yml merges them (combine recursive)."""
    from ansible_collections.gpuops.platform.plugins.filter.sriov_network_operator_objects import (
        sriov_network_operator_objects,
    )

    built = sriov_network_operator_objects({"sriov_network_operator_namespace": SRIOV_RELEASE})
    values = built["chart_values"]
    for key, value in (user or {}).items():
        values[key] = {**values.get(key, {}), **value} if isinstance(value, dict) else value
    return values


def test_upstream_sriov_chart_version_is_the_placeholder_the_lab_repackages(sriov_chart):
    """Upstream's Chart.yaml in git says 0.0.0-dev: hack/release/chart-update.sh stamps version 1.6.0 and appVersion
    v1.6.0 at release, and the lab packages it with --version 1.6.0 --app-version v1.6.0 (the role pins 1.6.0)."""
    meta = yaml.safe_load((sriov_chart / "Chart.yaml").read_text())
    assert (meta["name"], meta["version"], meta["appVersion"]) == (
        "sriov-network-operator-chart",
        "0.0.0-dev",
        "v0.0.0-dev",
    )
    defaults = yaml.safe_load((REPO / "roles/sriov_network_operator/defaults/main.yml").read_text())
    assert defaults["sriov_network_operator_chart_name"] == meta["name"]
    assert defaults["sriov_network_operator_chart_version"] == _lab().upstream_chart_version(meta["name"]) == "1.6.0"


def test_sriov_role_values_render_on_the_upstream_chart(sriov_chart):
    """What the chart creates with the role's values (sriovOperatorConfig.deploy false: the role applies the
    SriovOperatorConfig "default" itself) and the molecule scenario's operator tolerations."""
    docs = _sriov_render(sriov_chart, _sriov_role_values({"operator": {"tolerations": [KWOK]}}))
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == [
        ("ClusterRole", "sriov-network-config-daemon"),
        ("ClusterRole", "sriov-network-operator"),
        ("ClusterRoleBinding", "sriov-network-config-daemon"),
        ("ClusterRoleBinding", "sriov-network-operator"),
        ("ConfigMap", "supported-nic-ids"),
        ("Deployment", "sriov-network-operator"),
        ("Job", "sriov-network-operator-pre-delete-hook"),
        ("Role", "operator-webhook-sa"),
        ("Role", "sriov-network-config-daemon"),
        ("Role", "sriov-network-operator"),
        ("RoleBinding", "sriov-network-config-daemon"),
        ("RoleBinding", "sriov-network-operator"),
        ("ServiceAccount", "sriov-network-config-daemon"),
        ("ServiceAccount", "sriov-network-operator"),
    ]
    # no webhook configuration and no SriovOperatorConfig: the operator registers its webhooks itself, from the
    # SriovOperatorConfig's enableOperatorWebhook / enableInjector (the role's sriov_network_operator_config)
    assert not [d for d in docs if "Webhook" in d["kind"] or d["kind"] == "SriovOperatorConfig"]
    dep = _one(docs, "Deployment", "sriov-network-operator")
    pod = dep["spec"]["template"]
    # the pod label gpu_cluster_status and the role's second-operator guard look for (_sriov_inputs.second_operator)
    assert dep["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"] == {"name": "sriov-network-operator"}
    assert pod["spec"]["tolerations"] == [KWOK]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    # the standalone chart's prefix (_sriov_policy.DEFAULT_PREFIX["standalone"]); webhooks' certificates off
    assert env["RESOURCE_PREFIX"] == "openshift.io" and env["CLUSTER_TYPE"] == "kubernetes"
    assert not [k for k in env if k.startswith("ADMISSION_CONTROLLERS_")]
    # git's values.yaml names the images without a tag (chart-update.sh stamps them at release): ":latest" on a real
    # cluster when packaged from git as the lab does; the lab runs no image (kwok), so it does not matter there
    assert pod["spec"]["containers"][0]["image"] == "ghcr.io/k8snetworkplumbingwg/sriov-network-operator"
    cm = _one(docs, "ConfigMap", "supported-nic-ids")
    assert cm["data"]["Nvidia_mlx5_ConnectX-7"] == "15b3 1021 101e"


def test_upstream_sriov_pre_delete_hook_job_has_no_scheduling_values(sriov_chart):
    """templates/pre-delete-webooks.yaml: a pre-delete hook Job (`helm uninstall` waits for it) running
    sriov-network-operator-config-cleanup, which deletes the SriovOperatorConfig default. Unlike the Deployment it takes
    no tolerations, node selector or affinity from any value: it schedules only on a node without NoSchedule taints."""
    docs = _sriov_render(
        sriov_chart, _sriov_role_values({"operator": {"tolerations": [KWOK], "nodeSelector": {"a": "b"}}})
    )
    job = _one(docs, "Job", "sriov-network-operator-pre-delete-hook")
    assert job["metadata"]["annotations"] == {
        "helm.sh/hook": "pre-delete",
        "helm.sh/hook-delete-policy": "hook-succeeded,hook-failed",
    }
    spec = job["spec"]["template"]["spec"]
    assert spec["containers"][0]["command"] == ["sriov-network-operator-config-cleanup"]
    assert spec["containers"][0]["args"] == ["--namespace", SRIOV_RELEASE]
    assert not {"tolerations", "nodeSelector", "affinity"} & set(spec)
    assert job["spec"]["backoffLimit"] == 2


def test_upstream_sriov_chart_renders_the_operator_config_only_when_asked(sriov_chart):
    """sriovOperatorConfig.deploy (upstream default false) renders the SriovOperatorConfig "default" the role applies
    itself; the role keeps it false so the object has one owner. operator.admissionControllers.enabled turns on
    enableOperatorWebhook and enableInjector there and hands the operator its webhook certificates' Secrets."""
    assert not [d for d in _sriov_render(sriov_chart, {}) if d["kind"] == "SriovOperatorConfig"]
    docs = _sriov_render(sriov_chart, {"sriovOperatorConfig": {"deploy": True}})
    spec = _one(docs, "SriovOperatorConfig", "default")["spec"]
    assert (spec["enableOperatorWebhook"], spec["enableInjector"]) == (False, False)
    values = {"sriovOperatorConfig": {"deploy": True}, "operator": {"admissionControllers": {"enabled": True}}}
    docs = _sriov_render(sriov_chart, values)
    spec = _one(docs, "SriovOperatorConfig", "default")["spec"]
    assert (spec["enableOperatorWebhook"], spec["enableInjector"]) == (True, True)
    env = {
        e["name"]
        for e in _one(docs, "Deployment", "sriov-network-operator")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert {
        "ADMISSION_CONTROLLERS_CERTIFICATES_OPERATOR_SECRET_NAME",
        "ADMISSION_CONTROLLERS_CERTIFICATES_OPERATOR_CA_CRT",
    } <= env


def test_upstream_sriov_crds(sriov_chart):
    """The eight CRDs the lab installs before its operator starts (gpuops_lab.sriov.crd_files)."""
    kinds = {}
    for path in sorted((sriov_chart / "crds").glob("*.yaml")):
        for d in yaml.safe_load_all(path.read_text()):
            if d:
                kinds[d["spec"]["names"]["kind"]] = (d["spec"]["group"], d["spec"]["scope"])
    sriov = "sriovnetwork.openshift.io"
    assert kinds == {
        "NetworkAttachmentDefinition": ("k8s.cni.cncf.io", "Namespaced"),
        "OVSNetwork": (sriov, "Namespaced"),
        "SriovIBNetwork": (sriov, "Namespaced"),
        "SriovNetwork": (sriov, "Namespaced"),
        "SriovNetworkNodePolicy": (sriov, "Namespaced"),
        "SriovNetworkNodeState": (sriov, "Namespaced"),
        "SriovNetworkPoolConfig": (sriov, "Namespaced"),
        "SriovOperatorConfig": (sriov, "Namespaced"),
    }

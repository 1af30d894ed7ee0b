"""The upstream charts the lab's chart repository serves in place of a fixture (issue 27 §6, hack/gpuops_lab/charts.py),
rendered with the real helm from the lab's build cache (hack/cluster/build.sh copies them out of their Go module zips;
a missing one fails, naming the build step): what the roles set is what upstream reads. Node Feature Discovery v0.19.0
(deployment/helm/node-feature-discovery): the nfd role's values against its values.schema.json and templates."""

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

"""One SR-IOV Network Operator, from the Network Operator's chart: network_operator in mode `sriov` with
`sriov_network_operator_source: network_operator` (the bundled copy), then sriov_network_operator with the same
source, against the lab. The SR-IOV operator Deployment comes from the Network Operator release's subchart
(`sriovNetworkOperator.enabled: true`, tests/fixtures/charts/network-operator/26.4.1/charts/sriov-network-operator:
a stub holding the operator Deployment only, its CRDs come from the lab), the sriov_network_operator role installs no
standalone release, and exactly one SR-IOV operator Deployment exists in the cluster. Both roles' `state: absent`
remove it all afterwards. Both sources at once are refused before any change (unit tables:
tests/unit/plugins/module_utils/test_sriov_policy.py source_findings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from gpuops_lab import sriov
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
KWOK = [
    {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]


def _playbook(cluster, tmp: Path, namespace: str, state: str) -> subprocess.CompletedProcess[str]:
    variables = {
        "gpuops_kubeconfig": cluster.kubeconfig,
        "gpuops_chart_repo_mirror": f"http://127.0.0.1:{os.environ.get('GPUOPS_LAB_CHART_REPO_PORT', '18879')}",
        "gpuops_network_operator_managed": True,
        "sriov_network_operator_source": "network_operator",
        "network_operator_mode": "sriov",
        "network_operator_namespace": namespace,
        "network_operator_values": {
            "operator": {"tolerations": KWOK},
            "sriov-network-operator": {"operator": {"tolerations": KWOK}},
        },
        "network_operator_tolerations": KWOK,
        "network_operator_wait_timeout": 120,
        "network_operator_state": state,
        "sriov_network_operator_namespace": namespace,
        "sriov_network_operator_state": state,
    }
    roles = ["gpuops.platform.network_operator", "gpuops.platform.sriov_network_operator"]
    play = {
        "name": f"SR-IOV operator from the Network Operator chart ({state})",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": variables,
        "roles": roles if state == "present" else roles[::-1],  # the SR-IOV CRs go while their operator runs
    }
    path = tmp / f"{state}.yml"
    path.write_text(yaml.safe_dump([play]))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_HOME": str(REPO / ".state" / "ansible-home"),
        "ANSIBLE_NOCOLOR": "1",
    }
    argv = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        str(path),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
    ]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=480, check=False)


def _helm(cluster, *args: str) -> str:
    argv = ["helm", "--kubeconfig", cluster.kubeconfig, *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


def _operators(cluster) -> list[tuple[str, str]]:
    """The SR-IOV operator Deployments of the cluster: pod label name=sriov-network-operator, which both charts use."""
    found = client.AppsV1Api(cluster.api_client).list_deployment_for_all_namespaces().items
    return sorted(
        (d.metadata.namespace, d.metadata.name)
        for d in found
        if (d.spec.selector.match_labels or {}).get("name") == "sriov-network-operator"
    )


@pytest.fixture(scope="module")
def bundled(cluster, tmp_path_factory):
    """Both roles applied with the bundled source in a namespace of this module; both removed afterwards."""
    sriov.ensure_prereqs(
        cluster.api_client, cfg=cluster.cfg
    )  # the stub subchart has no CRDs; a molecule uninstall may have run
    try:
        policies = client.CustomObjectsApi(cluster.api_client).list_cluster_custom_object(
            "mellanox.com", "v1alpha1", "nicclusterpolicies"
        )["items"]
    except client.ApiException as exc:
        if exc.status != 404:  # 404: no CRD yet, the role's chart brings it
            raise
        policies = []
    assert "nic-cluster-policy" not in {p["metadata"]["name"] for p in policies}, (
        "a NicClusterPolicy nic-cluster-policy exists: this module's network_operator run would take it over"
    )
    tmp = tmp_path_factory.mktemp("bundled")
    namespace = f"t{uuid.uuid4().hex[:6]}-netop"
    try:
        r = _playbook(cluster, tmp, namespace, "present")
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
        yield namespace
    finally:
        r = _playbook(cluster, tmp, namespace, "absent")
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
        core = client.CoreV1Api(cluster.api_client)
        try:
            core.delete_namespace(namespace)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def test_the_sriov_operator_comes_from_the_network_operator_chart_only(cluster, bundled):
    releases = json.loads(_helm(cluster, "list", "-A", "-o", "json"))
    charts = {(r["namespace"], r["name"]): r["chart"] for r in releases}
    assert charts.get((bundled, "network-operator")) == "network-operator-26.4.1", charts
    # no standalone release anywhere
    assert not [k for k, chart in charts.items() if chart.startswith("sriov-network-operator-chart")], charts
    values = json.loads(_helm(cluster, "get", "values", "network-operator", "-n", bundled, "-a", "-o", "json"))
    assert values["sriovNetworkOperator"] == {"enabled": True}
    manifest = _helm(cluster, "get", "manifest", "network-operator", "-n", bundled)
    assert "# Source: network-operator/charts/sriov-network-operator/templates/operator.tpl" in manifest
    # never both: one SR-IOV operator Deployment in the cluster, the subchart's, with the Network Operator's prefix
    assert _operators(cluster) == [(bundled, "sriov-network-operator")]
    dep = client.AppsV1Api(cluster.api_client).read_namespaced_deployment("sriov-network-operator", bundled)
    assert dep.metadata.labels["app.kubernetes.io/instance"] == "network-operator"
    env = {e.name: e.value for e in dep.spec.template.spec.containers[0].env}
    assert env["RESOURCE_PREFIX"] == "nvidia.com"
    # the sriov_network_operator role applied its SriovOperatorConfig beside the bundled operator
    config = client.CustomObjectsApi(cluster.api_client).get_namespaced_custom_object(
        "sriovnetwork.openshift.io", "v1", bundled, "sriovoperatorconfigs", "default"
    )
    assert config["metadata"]["name"] == "default"
    # ... and only the role: the chart's own copy (deploy: true in network-operator 26.4.1's values) is off, so Helm
    # neither renders nor owns it (two owners made the next helm upgrade fail on .spec.logLevel)
    assert values["sriov-network-operator"]["sriovOperatorConfig"]["deploy"] is False
    assert "kind: SriovOperatorConfig" not in manifest
    managers = {m["manager"] for m in config["metadata"].get("managedFields") or []}
    assert "helm" not in managers, managers

"""The gpu_operator role on the local control plane with the operator simulator: bad input fails before
any change, --check creates nothing, --check --diff after a values change changes nothing, an upgrade
with a CRD change lands (CRDs applied first) and its values are verified, a node added later gets GPUs
without re-running the role, an injected fault is named by the diagnosis, and uninstall leaves nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
KWOK = [
    {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]


def _env(cluster, tmp_path, **hostvars_extra) -> dict:
    """An inventory (the controller, the lab's kubeconfig and chart repository, a namespace of its own; more host
    variables from `hostvars_extra`) and a playbook that runs the gpu_operator role."""
    ns = f"gop-{uuid.uuid4().hex[:6]}"
    inv = tmp_path / "inventory.yml"
    hostvars = {
        "ansible_connection": "local",
        "ansible_python_interpreter": str(REPO / ".venv/bin/python"),
        "gpuops_kubeconfig": cluster.kubeconfig,
        "gpuops_chart_repo_mirror": cluster.chart_repo_url,
        "gpuops_nfd_managed": True,  # the bundled NFD stays off; the simulated nodes carry the NFD labels
        "gpu_operator_namespace": ns,
        "gpu_operator_operator_tolerations": KWOK,
        "gpu_operator_tolerations": KWOK,
        "gpu_operator_wait_timeout": 150,
        **hostvars_extra,
    }
    inv.write_text(yaml.safe_dump({"all": {"children": {"cluster_controller": {"hosts": {"localhost": hostvars}}}}}))
    pb = tmp_path / "gpu_operator.yml"
    pb.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "GPU operator",
                    "hosts": "cluster_controller",
                    "gather_facts": False,
                    "roles": [{"role": "gpuops.platform.gpu_operator"}],
                }
            ]
        )
    )
    return {"inv": inv, "pb": pb, "ns": ns, "cluster": cluster}


@pytest.fixture
def env(cluster, tmp_path):
    e = _env(cluster, tmp_path)
    yield e
    # uninstall whatever the test left (a test that ends with its own uninstall, asserted, leaves nothing)
    namespaces = [n.metadata.name for n in client.CoreV1Api(cluster.api_client).list_namespace().items]
    if releases(e["ns"]) or cluster_policy(cluster.api_client) is not None or e["ns"] in namespaces:
        play(e["inv"], e["pb"], "-e", json.dumps({"gpu_operator_state": "absent"}))


@pytest.fixture
def inputs_env(cluster, tmp_path):
    """For runs that install nothing (the inputs check stops them, or --check): nothing to uninstall (each test
    asserts no release)."""
    return _env(cluster, tmp_path)


def play(inv: Path, pb: Path, *args: str) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    return subprocess.run(
        ["ansible-playbook", str(pb), "-i", str(inv), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=e,
        check=False,
    )


def recap(out: str) -> dict[str, int]:
    m = re.search(r"^localhost\s+:\s+(ok=.*)$", out, re.M)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))} if m else {}


def cluster_policy(api) -> dict | None:
    try:
        return client.CustomObjectsApi(api).get_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", "cluster-policy"
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def releases(ns: str) -> list[str]:
    kc = os.environ.get("GPUOPS_LAB_STATE", str(REPO / ".state/lab")) + "/kubeconfig"
    r = subprocess.run(
        ["helm", "--kubeconfig", kc, "-n", ns, "list", "-q"], capture_output=True, text=True, check=False
    )
    return r.stdout.split()


# Every bad value of one run is reported at once, each naming the variable, its value and the fix.
BAD_INPUTS = {
    "gpu_operator_mig_strategy": ("double", 'gpu_operator_mig_strategy: "double". The value is not one of'),
    "gpu_operator_driver_kernel_module_type": ("closed", 'gpu_operator_driver_kernel_module_type: "closed"'),
    # the chart-version error names the variable, not only the value
    "gpu_operator_chart_version": ("latest", 'gpu_operator_chart_version: "latest". The value is not a pinned'),
    "gpu_operator_namespace": ("GPU_Operator", 'gpu_operator_namespace: "GPU_Operator". The value is not a DNS'),
    "gpu_operator_release_name": ("r" * 54, "The value is longer than 53 characters"),
    "gpu_operator_driver_version": ("595.91.07;id", "shell metacharacter(s) ';'"),
    "gpu_operator_wait_timeout": ("soon", 'gpu_operator_wait_timeout: "soon". The value is a str; the role needs'),
    "gpu_operator_mig_stratgy": ("mixed", "did you mean gpu_operator_mig_strategy?"),
    # removed: it landed nowhere (neither the chart nor the ClusterPolicy has daemonsets.nodeSelector)
    "gpu_operator_node_selector": ({"pool": "a"}, "nvidia.com/gpu.deploy.operands=false"),
}


def test_bad_inputs_are_all_reported_before_any_change(inputs_env):
    """The run's preflight (operators.yml, site.yml) reports every bad value at once."""
    extra = {k: v for k, (v, _expect) in BAD_INPUTS.items()}
    r = play(inputs_env["inv"], REPO / "playbooks/operators.yml", "-e", json.dumps(extra))
    assert r.returncode != 0
    out = " ".join(r.stdout.split())  # the YAML callback folds long messages
    assert f"gpu_operator: {len(BAD_INPUTS)} input error(s), nothing was changed" in out, r.stdout[-3000:]
    for var, (_value, expect) in BAD_INPUTS.items():
        assert expect in out, var
    assert recap(r.stdout)["changed"] == 0
    assert releases(inputs_env["ns"]) == []


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        # the role alone: Ansible's own argument validation names type and choice errors first
        ({"gpu_operator_mig_strategy": "double"}, "gpu_operator_mig_strategy must be one of: none, single, mixed"),
        ({"gpu_operator_chart_version": "latest"}, 'gpu_operator_chart_version: "latest". The value is not a pinned'),
        ({"gpu_operator_node_selector": {"pool": "a"}}, "nvidia.com/gpu.deploy.operands=false"),
        ({"gpu_operator_values": "driver=off"}, 'gpu_operator_values: "driver=off". The value is a str'),
        (
            {"gpu_operator_values": {"driver": {"enabled": "false"}}},
            'gpu_operator_values.driver.enabled: "false". The role sets driver.enabled as a bool',
        ),
    ],
)
def test_bad_values_fail_before_any_change(inputs_env, extra, expect):
    r = play(inputs_env["inv"], inputs_env["pb"], "-e", json.dumps(extra))
    assert r.returncode != 0
    assert expect in " ".join(r.stdout.split()), r.stdout[-3000:]
    assert releases(inputs_env["ns"]) == []


def test_an_unreachable_mirror_fails_before_any_release(inputs_env):
    env = inputs_env  # nothing is installed (asserted below), so there is nothing to uninstall afterwards
    r = play(env["inv"], env["pb"], "-e", json.dumps({"gpuops_chart_repo_mirror": "http://127.0.0.1:9/charts"}))
    assert r.returncode != 0
    out = " ".join(r.stdout.split())
    # the role alone: refused when its release reads the repository, before any release (the run's plan refuses it
    # earlier, in site.yml's preflight)
    assert "the chart repository http://127.0.0.1:9/charts did not answer" in out.lower(), r.stdout[-3000:]
    assert "nothing was changed" in out.lower()
    assert "(gpuops_chart_repo_mirror)" in out
    assert releases(env["ns"]) == []


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        # the Kubernetes client failed on this with "'int' object is not iterable", naming nothing
        ("42\n", "The file is not a kubeconfig: its content is an int (42)"),
        (None, "The file does not exist"),
    ],
)
def test_a_bad_kubeconfig_is_named_with_its_variable_and_fix(inputs_env, tmp_path, content, expect):
    env = inputs_env
    kc = tmp_path / "kubeconfig"
    if content is not None:
        kc.write_text(content)
    r = play(env["inv"], env["pb"], "-e", json.dumps({"gpuops_kubeconfig": str(kc)}))
    assert r.returncode != 0
    out = " ".join(r.stdout.split())  # the YAML callback folds long messages
    assert f'gpuops_kubeconfig: "{kc}". {expect}' in out, r.stdout[-3000:]
    assert "Fix: set gpuops_kubeconfig to the path of a valid kubeconfig" in out
    assert "object is not iterable" not in out
    assert releases(env["ns"]) == []


def test_a_missing_context_is_named(inputs_env):
    env = inputs_env
    r = play(env["inv"], env["pb"], "-e", json.dumps({"gpuops_kubeconfig_context": "no-such-context"}))
    assert r.returncode != 0
    out = " ".join(r.stdout.split())
    assert 'gpuops_kubeconfig_context: "no-such-context". The kubeconfig' in out, r.stdout[-3000:]


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        ({"gpu_operator_mig_strategy": "double"}, "gpu_operator_mig_strategy"),
        (
            {"gpuops_amd_gpu_operator_managed": True, "amd_gpu_operator_driver_version": "30.20.1; reboot"},
            "amd_gpu_operator_driver_version",
        ),
    ],
)
def test_the_run_checks_every_roles_inputs_before_nfd_changes_anything(inputs_env, core, extra, expect):
    """operators.yml runs NFD first: a bad value of a later role must stop the run before NFD installs."""
    nfd_ns = f"nfd-{uuid.uuid4().hex[:6]}"
    extra = {**extra, "nfd_namespace": nfd_ns, "nfd_release_name": nfd_ns}
    r = play(inputs_env["inv"], REPO / "playbooks/operators.yml", "-e", json.dumps(extra))
    assert r.returncode != 0
    assert expect in r.stdout, r.stdout[-3000:]
    assert "input error(s), nothing was changed" in r.stdout
    assert recap(r.stdout)["changed"] == 0
    assert releases(nfd_ns) == [] and nfd_ns not in [n.metadata.name for n in core.list_namespace().items]


def test_unknown_user_value_key_is_reported(inputs_env):
    env = inputs_env  # --check: nothing is installed (asserted below)
    r = play(
        env["inv"],
        env["pb"],
        "--check",
        "-e",
        json.dumps({"gpu_operator_values": {"driver": {"rdma": {"enabeld": True}}}}),
    )
    assert "driver.rdma.enabeld" in r.stdout and "are not in chart gpu-operator" in r.stdout, r.stdout[-3000:]
    assert releases(env["ns"]) == []


def test_lifecycle(env, add_nodes, core):
    api = env["cluster"].api_client
    nodes = add_nodes("dgx-h100", 1)

    # --check on a fresh cluster creates nothing
    r = play(env["inv"], env["pb"], "--check", "-e", json.dumps({"gpu_operator_chart_version": "v26.3.1"}))
    assert r.returncode == 0, r.stdout[-4000:]
    assert recap(r.stdout)["changed"] > 0
    assert releases(env["ns"]) == [] and cluster_policy(api) is None

    # install the older version; the node gets GPUs from the (simulated) operator
    r = play(env["inv"], env["pb"], "-e", json.dumps({"gpu_operator_chart_version": "v26.3.1"}))
    assert r.returncode == 0, r.stdout[-4000:]
    assert cluster_policy(api)["status"]["state"] == "ready"
    assert core.read_node(nodes[0]).status.allocatable.get("nvidia.com/gpu") == "8"

    # (an unchanged rerun changing nothing is molecule's idempotence step of the gpu_operator scenario)

    # --check --diff after a values change shows it and changes nothing
    r = play(
        env["inv"],
        env["pb"],
        "--check",
        "--diff",
        "-e",
        json.dumps({"gpu_operator_chart_version": "v26.3.1", "gpu_operator_mig_strategy": "mixed"}),
    )
    assert r.returncode == 0 and recap(r.stdout)["changed"] > 0, r.stdout[-4000:]
    # the rendered manifests' diff and the values that differ (helm_release_apply); the release is unchanged
    assert re.search(r"^-\s+strategy: single$", r.stdout, re.M), r.stdout[-4000:]
    assert re.search(r"^\+\s+strategy: mixed$", r.stdout, re.M), r.stdout[-4000:]
    assert "values differ at mig.strategy" in r.stdout, r.stdout[-4000:]
    assert cluster_policy(api)["spec"]["mig"]["strategy"] == "single"

    # upgrade to v26.7.0: its CRD adds fields (the new scrapeTimeout default would be rejected by the old
    # CRD); the role applies the CRDs first, and the values asked for are verified in the live object
    r = play(env["inv"], env["pb"], "-e", json.dumps({"gpu_operator_mig_strategy": "mixed"}))
    assert r.returncode == 0, r.stdout[-4000:]
    cp = cluster_policy(api)
    assert cp["spec"]["mig"]["strategy"] == "mixed"
    assert cp["spec"]["dcgmExporter"]["serviceMonitor"]["scrapeTimeout"] == "10s"
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition("clusterpolicies.nvidia.com")
    props = crd.spec.versions[0].schema.open_apiv3_schema.properties["spec"].properties["hostPaths"].properties
    assert "kubeletRootDir" in props

    # a node added later gets GPUs without re-running the role
    late = add_nodes("dgx-h100", 1)[0]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and core.read_node(late).status.allocatable.get("nvidia.com/gpu") != "8":
        time.sleep(1)
    assert core.read_node(late).status.allocatable.get("nvidia.com/gpu") == "8"

    # a fault on one node: validation fails and names the cause and the node
    core.patch_node(late, {"metadata": {"annotations": {"sim.gpuops.io/faults": "driver-crashloop"}}})
    r = play(
        env["inv"], env["pb"], "-e", json.dumps({"gpu_operator_mig_strategy": "mixed", "gpu_operator_wait_timeout": 20})
    )
    assert r.returncode != 0
    assert "driver-crashloop" in r.stdout and late in r.stdout, r.stdout[-4000:]
    core.patch_node(late, {"metadata": {"annotations": {"sim.gpuops.io/faults": None}}})

    # uninstall leaves nothing behind
    r = play(env["inv"], env["pb"], "-e", json.dumps({"gpu_operator_state": "absent"}))
    assert r.returncode == 0, r.stdout[-4000:]
    assert releases(env["ns"]) == [] and cluster_policy(api) is None
    assert env["ns"] not in [n.metadata.name for n in core.list_namespace().items]

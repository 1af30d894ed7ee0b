"""The simulated NVIDIA GPU Operator (ClusterPolicyHandler): its decisions as tables (active ClusterPolicy,
node labelling, operands, per-node health under faults, resources by MIG strategy, GFD labels, status) and
the handler running against the fake client, with a stand-in for the DaemonSet controller, scheduler and
kwok (one Running/Ready pod per DaemonSet and matching node). GFD publishes its labels in a NodeFeature
(nfd-master, absent here, puts them on the node): the tests read the NodeFeature, and check the handler
never writes a GFD label to a Node itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from gpuops_lab import profiles
from gpuops_lab.simulator.fakeclient import FakeKubeClient, make_pod
from gpuops_lab.simulator.faults import FAULTS_ANNOTATION
from gpuops_lab.simulator.framework import MANAGED_STATUS_ANNOTATION, Key, Simulator
from gpuops_lab.simulator.handlers import BUILTIN_HANDLERS
from gpuops_lab.simulator.handlers.nvidia import (
    CLEANUP_KEY,
    DEFAULT_INSTANCE,
    GFD_TIMESTAMP_LABEL,
    HOST_DRIVER_CONFLICT_CONDITION,
    INSTANCE_LABEL,
    NODE_FEATURE,
    NODE_NAME_LABEL,
    NODE_OWNER_ANNOTATION,
    OK,
    OPERANDS,
    OPERATOR_NAMESPACE_ANNOTATION,
    ClusterPolicyHandler,
    PodPlan,
    daemonset_manifest,
    enabled_operands,
    gfd_labels,
    gfd_node_feature_name,
    gpu_info,
    image_path,
    is_gfd_label,
    mig_state,
    node_health,
    node_resources,
    oldest,
    operator_labels,
    policy_status,
    product_label,
)

NS = "gpu-operator"
NF_API = (NODE_FEATURE.api_version, NODE_FEATURE.kind)
H100 = gpu_info(profiles.load("dgx-h100"))
L40S = gpu_info(profiles.load("pcie-l40s"))
ALL_OPS = {op.key for op in OPERANDS}
DEPLOY = "nvidia.com/gpu.deploy."
CONTAINER_DEPLOY = {
    DEPLOY + k: "true"
    for k in (
        "driver",
        "gpu-feature-discovery",
        "container-toolkit",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "node-status-exporter",
        "operator-validator",
        "client",
    )
}


# -- pure decisions -----------------------------------------------------------------------------------


def cp_meta(name: str, created: str) -> dict:
    return {"metadata": {"name": name, "creationTimestamp": created}}


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        ([], None),
        ([cp_meta("b", "2025-01-01T00:00:01Z"), cp_meta("a", "2025-01-01T00:00:02Z")], "b"),
        ([cp_meta("b", "2025-01-01T00:00:01Z"), cp_meta("a", "2025-01-01T00:00:01Z")], "a"),
        ([cp_meta("cluster-policy", "2025-06-01T00:00:00Z")], "cluster-policy"),
    ],
)
def test_active_policy_is_oldest_then_by_name(policies, expected):
    got = oldest(policies)
    assert (got["metadata"]["name"] if got else None) == expected


def test_gpu_info_from_profiles():
    assert (H100.count, H100.product, H100.memory_mib, H100.mig_capable) == (8, "NVIDIA-H100-80GB-HBM3", 81559, True)
    assert H100.host_driver == "570.124.06" and H100.mig_instances("1g.10gb") == 7
    assert (L40S.count, L40S.product, L40S.mig_capable, L40S.host_driver) == (4, "NVIDIA-L40S", False, None)
    assert gpu_info(profiles.load("cpu-only")) is None and gpu_info(profiles.load("amd-mi300x")) is None
    assert product_label("NVIDIA A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"


PCI = {"feature.node.kubernetes.io/pci-10de.present": "true"}
MIG_DEFAULT_SPEC = {"migManager": {"enabled": True, "config": {"default": "all-disabled"}}}


@pytest.mark.parametrize(
    ("labels", "spec", "gpu", "faults", "expected"),
    [
        # NVIDIA GPU (any of the three NFD labels): gpu.present and the container deploy labels
        (PCI, {}, L40S, (), {"nvidia.com/gpu.present": "true", **CONTAINER_DEPLOY}),
        (
            {"feature.node.kubernetes.io/pci-0302_10de.present": "true"},
            {},
            L40S,
            (),
            {"nvidia.com/gpu.present": "true", **CONTAINER_DEPLOY},
        ),
        # MIG-capable: mig-manager too, whatever the spec enables
        (
            PCI,
            {"migManager": {"enabled": False}},
            H100,
            (),
            {"nvidia.com/gpu.present": "true", **CONTAINER_DEPLOY, DEPLOY + "mig-manager": "true"},
        ),
        # ... and the default MIG config when migManager.config.default is all-disabled
        (
            PCI,
            MIG_DEFAULT_SPEC,
            H100,
            (),
            {
                "nvidia.com/gpu.present": "true",
                **CONTAINER_DEPLOY,
                DEPLOY + "mig-manager": "true",
                "nvidia.com/mig.config": "all-disabled",
            },
        ),
        # a MIG config already chosen is kept
        (
            {**PCI, "nvidia.com/mig.config": "all-1g.10gb"},
            MIG_DEFAULT_SPEC,
            H100,
            (),
            {"nvidia.com/gpu.present": "true", **CONTAINER_DEPLOY, DEPLOY + "mig-manager": "true"},
        ),
        # no GPU PCI label: nothing
        ({"feature.node.kubernetes.io/pci-8086.present": "true"}, {}, None, (), {}),
        # a deploy label with a value is honoured (driver kept off this node)
        (
            {**PCI, DEPLOY + "driver": "false"},
            {},
            L40S,
            (),
            {"nvidia.com/gpu.present": "true", **{k: v for k, v in CONTAINER_DEPLOY.items() if "driver" not in k}},
        ),
        # operands disabled on the node: deploy labels removed
        (
            {**PCI, "nvidia.com/gpu.present": "true", **CONTAINER_DEPLOY, "nvidia.com/gpu.deploy.operands": "false"},
            {},
            L40S,
            (),
            {k: None for k in CONTAINER_DEPLOY},
        ),
        # NFD labels gone (fault): gpu.present false, deploy labels removed
        (
            {**PCI, "nvidia.com/gpu.present": "true", **CONTAINER_DEPLOY},
            {},
            L40S,
            ("nfd-labels-missing",),
            {"nvidia.com/gpu.present": "false", **{k: None for k in CONTAINER_DEPLOY}},
        ),
        # fault on a node never labelled: nothing
        (PCI, {}, L40S, ("nfd-labels-missing",), {}),
    ],
)
def test_operator_labels(labels, spec, gpu, faults, expected):
    assert operator_labels(labels, spec, gpu, faults) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, ALL_OPS),
        ({"driver": {"enabled": False}}, ALL_OPS - {"driver"}),
        ({"driver": {"enabled": True, "useNvidiaDriverCRD": True}}, ALL_OPS - {"driver"}),
        (
            {"dcgmExporter": {"enabled": False}, "migManager": {"enabled": False}},
            ALL_OPS - {"dcgm-exporter", "mig-manager"},
        ),
        (
            {"toolkit": {"enabled": False}, "devicePlugin": {"enabled": False}, "gfd": {"enabled": False}},
            {"driver", "operator-validator", "dcgm-exporter", "mig-manager"},
        ),
    ],
)
def test_enabled_operands(spec, expected):
    assert {op.key for op in enabled_operands(spec)} == expected


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (None, "nvcr.io/nvidia/driver:595.91.07"),
        ({"version": "580.126.20"}, "nvcr.io/nvidia/driver:580.126.20"),
        ({"repository": "registry.local/nv", "image": "drv", "version": "1"}, "registry.local/nv/drv:1"),
        ({"image": "registry.local/full/driver:9"}, "registry.local/full/driver:9"),
        ({"version": "sha256:abc"}, "nvcr.io/nvidia/driver@sha256:abc"),
    ],
)
def test_image_path(section, expected):
    assert image_path(section, ("nvcr.io/nvidia", "driver", "595.91.07")) == expected


def test_daemonset_manifest_follows_upstream_and_scopes_instances():
    cp = {
        "metadata": {"name": "cp", "uid": "u"},
        "spec": {
            "daemonsets": {
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "labels": {"team": "gpu"},
                "rollingUpdate": {"maxUnavailable": "1"},
            },
            "validator": {"repository": "r", "image": "validator", "version": "v1"},
        },
    }
    validator = next(op for op in OPERANDS if op.key == "operator-validator")
    ds = daemonset_manifest(validator, cp, NS, DEFAULT_INSTANCE)
    pod = ds["spec"]["template"]["spec"]
    meta = dict(ds["metadata"])
    applied_hash = meta.pop("annotations")["nvidia.com/last-applied-hash"]
    assert meta == {"name": "nvidia-operator-validator", "namespace": NS, "labels": {"app": meta["name"]}}
    # any change of the rendering changes the hash (so a key dropped from a map is applied too)
    cp2 = {**cp, "spec": {**cp["spec"], "daemonsets": {**cp["spec"]["daemonsets"], "labels": {}}}}
    changed = daemonset_manifest(validator, cp2, NS, DEFAULT_INSTANCE)["metadata"]["annotations"]
    assert changed["nvidia.com/last-applied-hash"] != applied_hash
    assert pod["nodeSelector"] == {"nvidia.com/gpu.deploy.operator-validator": "true"}
    assert [c["name"] for c in pod["initContainers"]] == [
        "driver-validation",
        "toolkit-validation",
        "cuda-validation",
        "plugin-validation",
    ]
    assert {c["image"] for c in pod["initContainers"] + pod["containers"]} == {"r/validator:v1"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert pod["priorityClassName"] == "system-node-critical"
    assert ds["spec"]["template"]["metadata"]["labels"] == {"team": "gpu", "app": "nvidia-operator-validator"}
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    # the default instance avoids nodes of other instances; another instance selects only its own
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": INSTANCE_LABEL, "operator": "DoesNotExist"}]}]
    scoped = daemonset_manifest(validator, cp, "t", "t")["spec"]["template"]["spec"]
    assert scoped["nodeSelector"][INSTANCE_LABEL] == "t" and "affinity" not in scoped
    driver = daemonset_manifest(OPERANDS[0], cp, NS, DEFAULT_INSTANCE)["spec"]["template"]["spec"]
    assert driver["initContainers"][0] == {
        "name": "k8s-driver-manager",
        "image": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
        "imagePullPolicy": "IfNotPresent",
    }
    assert driver["containers"][0]["name"] == "nvidia-driver-ctr"


INIT_DRIVER = PodPlan("init", "driver-validation")
INIT_TOOLKIT = PodPlan("init", "toolkit-validation")
DRIVER_DOWN = {
    "container-toolkit": INIT_DRIVER,
    "operator-validator": INIT_DRIVER,
    "device-plugin": INIT_TOOLKIT,
    "dcgm-exporter": INIT_TOOLKIT,
    "gpu-feature-discovery": INIT_TOOLKIT,
    "mig-manager": INIT_TOOLKIT,
}


@pytest.mark.parametrize(
    ("ops", "faults", "host_driver", "expected", "down"),
    [
        (ALL_OPS, (), True, {}, (False, False)),
        (
            ALL_OPS,
            ("driver-crashloop",),
            True,
            {
                "driver": PodPlan("crashloop", "nvidia-driver-ctr", "Failed to load NVIDIA kernel modules"),
                **DRIVER_DOWN,
            },
            (True, False),
        ),
        (
            ALL_OPS,
            ("host-driver-conflict",),
            True,
            {
                "driver": PodPlan("crashloop", "nvidia-driver-ctr", "nvidia driver already loaded on the host"),
                **DRIVER_DOWN,
            },
            (True, False),
        ),
        (
            ALL_OPS,
            ("toolkit-not-ready",),
            True,
            {
                "container-toolkit": PodPlan("notready", "nvidia-container-toolkit-ctr", "toolkit is not ready"),
                "operator-validator": INIT_TOOLKIT,
                "device-plugin": INIT_TOOLKIT,
                "dcgm-exporter": INIT_TOOLKIT,
                "gpu-feature-discovery": INIT_TOOLKIT,
                "mig-manager": INIT_TOOLKIT,
            },
            (False, True),
        ),
        (ALL_OPS, ("validator-init-stuck",), True, {"operator-validator": INIT_DRIVER}, (False, False)),
        # no driver pod (driver disabled): driver faults do nothing; a host driver is needed
        (ALL_OPS - {"driver"}, ("driver-crashloop",), True, {}, (False, False)),
        (ALL_OPS - {"driver"}, (), False, DRIVER_DOWN, (True, False)),
        # the operator's driver does not need one on the host
        (ALL_OPS, (), False, {}, (False, False)),
    ],
)
def test_node_health(ops, faults, host_driver, expected, down):
    health = node_health(ops, faults, host_driver)
    assert {k: v for k, v in health.plans.items() if v != OK} == expected
    assert (health.driver_down, health.toolkit_down) == down


def test_peermem_fault_only_with_gpudirect_rdma():
    plan = PodPlan("notready", "nvidia-peermem-ctr", "nvidia-peermem module is not loaded")
    health = node_health(ALL_OPS, ("peermem-not-loaded",), True, peermem=True)
    assert {k: v for k, v in health.plans.items() if v != OK} == {"driver": plan}
    assert (health.driver_down, health.toolkit_down) == (False, False)
    assert all(v == OK for v in node_health(ALL_OPS, ("peermem-not-loaded",), True).plans.values())


@pytest.mark.parametrize(
    ("gpu", "config", "strategy", "state", "resources"),
    [
        (H100, None, "single", None, {"nvidia.com/gpu": 8}),
        (H100, "all-disabled", "single", "success", {"nvidia.com/gpu": 8}),
        (H100, "all-disabled", "mixed", "success", {"nvidia.com/gpu": 8}),
        (H100, "all-1g.10gb", "none", "success", {"nvidia.com/gpu": 8}),
        (H100, "all-1g.10gb", "single", "success", {"nvidia.com/gpu": 56}),
        (H100, "all-1g.10gb", "mixed", "success", {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 56}),
        (H100, "all-3g.40gb", "mixed", "success", {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 16}),
        (H100, "all-1g.18gb", "single", "failed", {"nvidia.com/gpu": 8}),  # an H200 profile
        (H100, "custom-config", "mixed", "failed", {"nvidia.com/gpu": 8}),
        (L40S, "all-1g.10gb", "mixed", None, {"nvidia.com/gpu": 4}),  # not MIG-capable
    ],
)
def test_resources_by_mig_strategy(gpu, config, strategy, state, resources):
    got_state, profile, per_gpu = mig_state(gpu, config)
    assert got_state == state
    assert node_resources(gpu, strategy, profile, per_gpu) == resources


def test_gfd_labels():
    labels = gfd_labels(H100, "single", None, 0, "595.91.07")
    assert labels == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/cuda.driver.major": "595",
        "nvidia.com/cuda.driver.minor": "91",
        "nvidia.com/cuda.driver.rev": "07",
    }
    single = gfd_labels(H100, "single", "1g.10gb", 7, "570.124.06")
    assert single["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert single["nvidia.com/gpu.count"] == "56" and "nvidia.com/gpu.memory" not in single
    assert single["nvidia.com/cuda.driver.major"] == "570"
    mixed = gfd_labels(H100, "mixed", "1g.10gb", 7, None)
    assert mixed["nvidia.com/mig-1g.10gb.count"] == "56" and mixed["nvidia.com/gpu.count"] == "8"
    assert "nvidia.com/cuda.driver.major" not in mixed
    assert gfd_labels(L40S, "single", None, 0, None)["nvidia.com/mig.capable"] == "false"


@pytest.mark.parametrize(
    ("states", "gpu_nodes", "nfd", "state", "ready", "reason"),
    [
        ([], 2, True, "ready", "True", "Reconciled"),
        ([], 0, True, "ready", "True", "NoGPUNodes"),
        ([], 0, False, "ready", "True", "NFDLabelsMissing"),
        (["state-driver"], 2, True, "notReady", "False", "OperandNotReady"),
    ],
)
def test_policy_status(states, gpu_nodes, nfd, state, ready, reason):
    got_state, conditions = policy_status(states, gpu_nodes, nfd)
    by_type = {c["type"]: c for c in conditions}
    assert got_state == state and by_type["Ready"]["status"] == ready
    assert (by_type["Error"]["reason"] if state == "notReady" else by_type["Ready"]["reason"]) == reason
    if states:
        assert by_type["Error"]["message"] == "ClusterPolicy is not ready; states not ready: [state-driver]"


def test_handlers_are_builtin():
    from gpuops_lab.simulator.__main__ import load_handlers

    assert ClusterPolicyHandler in BUILTIN_HANDLERS
    assert {h.handler_name for h in load_handlers("builtin")} == {
        "ClusterPolicy",
        "DeviceConfig",
        "NfdWorker",
        "NicClusterPolicy",
        "MacvlanNetwork",
        "HostDeviceNetwork",
        "IPoIBNetwork",
        "SriovNetworkNodeState",
        "DraKubeletPlugin",
    }


# -- the handler against the fake client ---------------------------------------------------------------


def _selects(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    terms = (
        ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or [{}]
    for term in terms:
        ok = True
        for expr in term.get("matchExpressions") or ():
            if expr["operator"] == "DoesNotExist":
                ok = ok and expr["key"] not in labels
            elif expr["operator"] == "In":
                ok = ok and labels.get(expr["key"]) in expr["values"]
        if ok:
            return True
    return False


def play_daemonsets(client: FakeKubeClient) -> None:
    """The DaemonSet controller, scheduler and kwok: a Running/Ready pod per DaemonSet and matching node,
    deleted when the node stops matching."""
    nodes = list(client.objects.get(("v1", "Node"), {}).values())
    for key, ds in list(client.objects.get(("apps/v1", "DaemonSet"), {}).items()):
        tpl = ds["spec"]["template"]
        for node in nodes:
            name = f"{ds['metadata']['name']}-{node['metadata']['name']}"
            existing = client.obj("v1", "Pod", name, key.namespace)
            if _selects(tpl["spec"], node):
                if existing is None:
                    client.add(
                        make_pod(
                            name,
                            key.namespace,
                            node["metadata"]["name"],
                            owner=ds,
                            labels=tpl["metadata"]["labels"],
                            containers=tuple(c["name"] for c in tpl["spec"]["containers"]),
                            init_containers=tuple(c["name"] for c in tpl["spec"].get("initContainers") or ()),
                        )
                    )
            elif existing is not None:
                client.delete("v1", "Pod", name, key.namespace)


class Lab:
    """A fake cluster with the handler: nodes from hardware profiles, ClusterPolicies, and `settle()`
    running the handler and the DaemonSet stand-in until nothing changes."""

    def __init__(self, handler: ClusterPolicyHandler | None = None, namespace: str = NS) -> None:
        self.client = FakeKubeClient(cluster_scoped={("nvidia.com/v1", "ClusterPolicy")})
        self.client.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        self.handler = handler or ClusterPolicyHandler()
        self.sim = Simulator(self.client, [self.handler])
        self.namespace = namespace
        self._t = 0

    def node(self, name: str, profile: str, labels: Mapping[str, str] | None = None, faults: str = "") -> None:
        prof = profiles.load(profile)
        manifest = profiles.node_manifest(name, prof)
        manifest["metadata"]["labels"].update(profiles.nfd_labels(prof))  # what the lab's nfd-master sets
        manifest["metadata"]["labels"].update(labels or {})
        if faults:
            manifest["metadata"]["annotations"][FAULTS_ANNOTATION] = faults
        self.client.add(manifest)

    def policy(self, name: str, spec: Mapping[str, Any] | None = None, **meta: Any) -> None:
        self._t += 1
        self.client.add(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": name, "creationTimestamp": f"2025-01-01T00:00:{self._t:02d}Z", **meta},
                "spec": dict(spec or {}),
            }
        )

    def settle(self, rounds: int = 5) -> None:
        for _round in range(rounds):
            play_daemonsets(self.client)
            self.sim.sync()
            self.sim.process_pending()
        stamped = [
            (key, k)
            for verb, kind, key, body in self.client.writes
            if kind == "Node" and verb == "patch"
            for k in ((body or {}).get("metadata") or {}).get("labels") or {}
            if is_gfd_label(k)
        ]
        assert stamped == [], "the simulator wrote GFD labels to Nodes (GFD publishes a NodeFeature)"

    def set_faults(self, node: str, faults: str | None) -> None:
        self.client.patch("v1", "Node", node, None, {"metadata": {"annotations": {FAULTS_ANNOTATION: faults}}})

    # -- reading -----------------------------------------------------------------------------------
    def status(self, name: str = "cluster-policy") -> dict:
        return self.client.obj("nvidia.com/v1", "ClusterPolicy", name).get("status") or {}

    def condition(self, ctype: str, name: str = "cluster-policy") -> dict:
        return next((c for c in self.status(name).get("conditions") or () if c["type"] == ctype), {})

    def gpus(self, node: str, resource: str = "nvidia.com/gpu") -> str | None:
        status = self.client.obj("v1", "Node", node)["status"]
        assert status["capacity"].get(resource) == status["allocatable"].get(resource)
        return status["allocatable"].get(resource)

    def labels(self, node: str) -> dict[str, str]:
        labels = self.client.obj("v1", "Node", node)["metadata"]["labels"]
        return {k: v for k, v in labels.items() if k.startswith("nvidia.com/")}

    def node_features(self) -> set[tuple[str, str]]:
        """(namespace, name) of every NodeFeature."""
        return {(k.namespace, k.name) for k in self.client.objects.get(NF_API, {})}

    def node_feature(self, node: str, namespace: str | None = None) -> dict | None:
        return self.client.obj(*NF_API, gfd_node_feature_name(node), namespace or self.namespace)

    def gfd(self, node: str, namespace: str | None = None) -> dict[str, str] | None:
        """The labels GFD publishes for the node (its NodeFeature's spec.labels), None without one."""
        nf = self.node_feature(node, namespace)
        return None if nf is None else nf["spec"]["labels"]

    def pod(self, ds: str, node: str) -> dict | None:
        return self.client.obj("v1", "Pod", f"{ds}-{node}", self.namespace)

    def daemonsets(self) -> set[str]:
        return {k.name for k in self.client.objects.get(("apps/v1", "DaemonSet"), {})}


def waiting(pod: Mapping[str, Any], field: str = "containerStatuses") -> dict[str, str]:
    return {
        c["name"]: c["state"]["waiting"]["reason"]
        for c in (pod.get("status") or {}).get(field) or ()
        if "waiting" in c.get("state", {})
    }


@pytest.fixture
def lab() -> Lab:
    lab = Lab()
    lab.node("h0", "dgx-h100")
    lab.node("h1", "dgx-h100")
    lab.node("c0", "cpu-only")
    return lab


def test_gpu_nodes_get_operands_resources_and_labels(lab):
    lab.policy("cluster-policy", {"driver": {"enabled": True, "version": "580.126.20"}})
    lab.settle()
    assert lab.daemonsets() == {op.daemonset for op in OPERANDS}
    for ds in lab.client.objects[("apps/v1", "DaemonSet")].values():
        [ref] = ds["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("ClusterPolicy", "cluster-policy", True)
    for node in ("h0", "h1"):
        assert lab.gpus(node) == "8"
        labels = lab.labels(node)
        assert labels["nvidia.com/gpu.present"] == "true" and labels["nvidia.com/gpu.deploy.mig-manager"] == "true"
        assert not [k for k in labels if is_gfd_label(k)], "GFD labels stamped on the node"
        assert lab.client.obj("v1", "Node", node)["metadata"]["annotations"][NODE_OWNER_ANNOTATION] == "default"
        # GFD's NodeFeature, as k8s-device-plugin v0.20.0 internal/lm/output.go writes it
        nf = lab.node_feature(node)
        assert nf["metadata"]["name"] == f"nvidia-features-for-{node}" and nf["metadata"]["namespace"] == NS
        assert nf["metadata"]["labels"] == {NODE_NAME_LABEL: node}
        ds = lab.client.obj("apps/v1", "DaemonSet", "gpu-feature-discovery", NS)
        pod = lab.pod("gpu-feature-discovery", node)
        assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in nf["metadata"]["ownerReferences"]] == [
            ("DaemonSet", "gpu-feature-discovery", ds["metadata"]["uid"], True),
            ("Pod", pod["metadata"]["name"], pod["metadata"]["uid"], None),
        ]
        assert nf["spec"]["features"] == {"flags": {}, "attributes": {}, "instances": {}}
        gfd = dict(nf["spec"]["labels"])
        assert gfd.pop(GFD_TIMESTAMP_LABEL).isdigit()
        assert gfd == gfd_labels(H100, "single", None, 0, "580.126.20")
    assert lab.labels("c0") == {} and lab.gpus("c0") is None and lab.gfd("c0") is None
    assert lab.node_features() == {(NS, "nvidia-features-for-h0"), (NS, "nvidia-features-for-h1")}
    assert NODE_OWNER_ANNOTATION not in lab.client.obj("v1", "Node", "c0")["metadata"]["annotations"]
    assert lab.status()["state"] == "ready" and lab.status()["namespace"] == NS
    assert lab.condition("Ready")["reason"] == "Reconciled" and lab.condition("Error")["status"] == "False"
    # settled: another round writes nothing
    writes = len(lab.client.writes)
    lab.settle(2)
    assert lab.client.writes[writes:] == []


@pytest.mark.parametrize(
    ("fault", "pods", "gpus", "gfd", "states"),
    [
        (
            "driver-crashloop",
            {
                ("nvidia-driver-daemonset", "containerStatuses"): {"nvidia-driver-ctr": "CrashLoopBackOff"},
                ("nvidia-operator-validator", "initContainerStatuses"): {
                    "driver-validation": "PodInitializing",
                    "toolkit-validation": "PodInitializing",
                    "cuda-validation": "PodInitializing",
                    "plugin-validation": "PodInitializing",
                },
                ("nvidia-device-plugin-daemonset", "initContainerStatuses"): {"toolkit-validation": "PodInitializing"},
            },
            None,
            False,
            "state-driver state-container-toolkit state-operator-validation state-device-plugin "
            "state-dcgm-exporter gpu-feature-discovery state-mig-manager",
        ),
        (
            "toolkit-not-ready",
            {
                ("nvidia-driver-daemonset", "containerStatuses"): {},
                ("nvidia-device-plugin-daemonset", "initContainerStatuses"): {"toolkit-validation": "PodInitializing"},
            },
            None,
            False,
            "state-container-toolkit state-operator-validation state-device-plugin "
            "state-dcgm-exporter gpu-feature-discovery state-mig-manager",
        ),
        (
            "validator-init-stuck",
            {
                ("nvidia-operator-validator", "initContainerStatuses"): {
                    "driver-validation": "PodInitializing",
                    "toolkit-validation": "PodInitializing",
                    "cuda-validation": "PodInitializing",
                    "plugin-validation": "PodInitializing",
                },
                ("nvidia-device-plugin-daemonset", "initContainerStatuses"): {},
            },
            "8",
            True,
            "state-operator-validation",
        ),
    ],
)
def test_pod_faults(lab, fault, pods, gpus, gfd, states):
    lab.policy("cluster-policy")
    lab.settle()
    lab.set_faults("h0", fault)
    lab.settle()
    for (ds, field), expected in pods.items():
        assert waiting(lab.pod(ds, "h0"), field) == expected, ds
    assert lab.gpus("h0") == gpus and (lab.gfd("h0") is not None) == gfd
    assert lab.gpus("h1") == "8" and lab.gfd("h1") is not None, "the healthy node is affected"
    assert lab.status()["state"] == "notReady"
    error = lab.condition("Error")
    assert (error["status"], error["reason"]) == ("True", "OperandNotReady")
    assert error["message"] == f"ClusterPolicy is not ready; states not ready: [{states}]"
    assert lab.condition("Ready")["status"] == "False"
    if fault == "toolkit-not-ready":
        toolkit = lab.pod("nvidia-container-toolkit-daemonset", "h0")["status"]
        assert toolkit["phase"] == "Running" and not toolkit["containerStatuses"][0]["ready"]

    # cleared: pods released (healthy status, annotation gone), GPUs back, ready again
    lab.set_faults("h0", None)
    lab.settle()
    for ds, _field in pods:
        pod = lab.pod(ds, "h0")
        assert MANAGED_STATUS_ANNOTATION not in pod["metadata"]["annotations"]
        assert waiting(pod) == {}
    assert lab.gpus("h0") == "8" and lab.status()["state"] == "ready"
    assert lab.gfd("h0")["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_host_driver_conflict(lab):
    lab.policy("cluster-policy")
    lab.settle()
    lab.set_faults("h0", "host-driver-conflict")
    lab.settle()
    driver = lab.pod("nvidia-driver-daemonset", "h0")["status"]["containerStatuses"][0]
    assert driver["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert driver["lastState"]["terminated"]["message"] == "nvidia driver already loaded on the host"
    conds = {c["type"]: c for c in lab.client.obj("v1", "Node", "h0")["status"]["conditions"]}
    assert conds[HOST_DRIVER_CONFLICT_CONDITION]["status"] == "True"
    assert "Ready" not in conds, "node Ready is kwok's: the handler must not write it"
    assert lab.gpus("h0") is None and lab.status()["state"] == "notReady"
    lab.set_faults("h0", None)
    lab.settle()
    conds = {c["type"]: c for c in lab.client.obj("v1", "Node", "h0")["status"]["conditions"]}
    assert conds[HOST_DRIVER_CONFLICT_CONDITION]["status"] == "False" and lab.gpus("h0") == "8"


def test_nfd_labels_missing(lab):
    lab.set_faults("h0", "nfd-labels-missing")
    lab.policy("cluster-policy")
    lab.settle()
    assert lab.labels("h0") == {} and lab.gpus("h0") is None
    assert lab.pod("nvidia-driver-daemonset", "h0") is None
    assert lab.gpus("h1") == "8" and lab.status()["state"] == "ready"
    # on a labelled node: gpu.present=false, deploy labels and pods gone
    lab.set_faults("h1", "nfd-labels-missing")
    lab.settle()
    assert lab.labels("h1") == {"nvidia.com/gpu.present": "false"} and lab.gpus("h1") is None
    assert lab.pod("nvidia-device-plugin-daemonset", "h1") is None and lab.gfd("h1") is None
    assert lab.condition("Ready")["reason"] == "NoGPUNodes"


def test_faults_from_the_configmap_for_all_nodes(lab):
    lab.policy("cluster-policy")
    lab.settle()
    lab.client.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpuops-sim"}})
    lab.client.add(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpuops-sim-faults", "namespace": "gpuops-sim"},
            "data": {"_all": "driver-crashloop"},
        }
    )
    lab.settle()
    assert lab.gpus("h0") is None and lab.gpus("h1") is None


@pytest.mark.parametrize(
    ("profile", "gpus", "driver_major"),
    [("dgx-h100", "8", "570"), ("pcie-l40s", None, None)],  # host driver 570 / none
)
def test_driver_disabled_uses_the_host_driver(profile, gpus, driver_major):
    lab = Lab()
    lab.node("n0", profile)
    lab.policy("cluster-policy", {"driver": {"enabled": False}})
    lab.settle()
    assert "nvidia-driver-daemonset" not in lab.daemonsets()
    assert lab.gpus("n0") == gpus
    assert (lab.gfd("n0") or {}).get("nvidia.com/cuda.driver.major") == driver_major
    assert lab.status()["state"] == ("ready" if gpus else "notReady")


@pytest.mark.parametrize(
    ("strategy", "config", "resources", "state"),
    [
        ("mixed", "all-1g.10gb", {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}, "success"),
        ("single", "all-1g.10gb", {"nvidia.com/gpu": "56"}, "success"),
        ("mixed", "all-disabled", {"nvidia.com/gpu": "8"}, "success"),
        ("mixed", "bogus", {"nvidia.com/gpu": "8"}, "failed"),
    ],
)
def test_mig_configs(strategy, config, resources, state):
    lab = Lab()
    lab.node("h0", "dgx-h100", labels={"nvidia.com/mig.config": config})
    lab.policy("cluster-policy", {"mig": {"strategy": strategy}})
    lab.settle()
    alloc = lab.client.obj("v1", "Node", "h0")["status"]["allocatable"]
    assert {k: v for k, v in alloc.items() if k.startswith("nvidia.com/")} == resources
    assert lab.labels("h0")["nvidia.com/mig.config.state"] == state
    gfd = lab.gfd("h0")
    assert gfd["nvidia.com/mig.strategy"] == strategy
    assert ("nvidia.com/mig-1g.10gb.count" in gfd) == ("nvidia.com/mig-1g.10gb" in resources)
    stamp = gfd[GFD_TIMESTAMP_LABEL]
    # back to whole GPUs: the MIG resource goes away, and the MIG labels from GFD's NodeFeature
    lab.client.patch("v1", "Node", "h0", None, {"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled"}}})
    lab.settle()
    alloc = lab.client.obj("v1", "Node", "h0")["status"]["allocatable"]
    assert {k: v for k, v in alloc.items() if k.startswith("nvidia.com/")} == {"nvidia.com/gpu": "8"}
    # mig-manager paused GFD for the change (paused-for-mig-change): a new GFD pod, a new timestamp
    gfd = dict(lab.gfd("h0") or {})
    assert gfd.pop(GFD_TIMESTAMP_LABEL) >= stamp
    assert gfd == gfd_labels(H100, strategy, None, 0, "595.91.07")


def test_second_policy_is_ignored_until_the_first_is_deleted(lab):
    lab.policy("cluster-policy")
    lab.policy("another")
    lab.settle()
    assert lab.status("another")["state"] == "ignored"
    assert lab.condition("Ready", "another")["reason"] == "Ignored"
    assert lab.status()["state"] == "ready"
    lab.client.delete("nvidia.com/v1", "ClusterPolicy", "cluster-policy")
    lab.settle()
    assert lab.status("another")["state"] == "ready"
    owners = {
        ds["metadata"]["ownerReferences"][0]["name"] for ds in lab.client.objects[("apps/v1", "DaemonSet")].values()
    }
    assert owners == {"another"} and lab.gpus("h0") == "8"


def test_deleting_the_policy_cleans_nodes_up(lab):
    lab.policy("cluster-policy")
    lab.settle()
    lab.client.delete("nvidia.com/v1", "ClusterPolicy", "cluster-policy")
    lab.settle()
    assert lab.daemonsets() == set()  # the fake client cascades like the garbage collector
    assert lab.node_features() == set()
    for node in ("h0", "h1"):
        assert lab.labels(node) == {} and lab.gpus(node) is None
        assert NODE_OWNER_ANNOTATION not in lab.client.obj("v1", "Node", node)["metadata"]["annotations"]


def test_cleanup_after_restart_without_policy():
    lab = Lab()
    lab.node("h0", "dgx-h100")
    lab.policy("cluster-policy")
    lab.settle()
    # the ClusterPolicy goes while no simulator runs; a fresh one finds the node it owned
    lab.client.delete("nvidia.com/v1", "ClusterPolicy", "cluster-policy")
    fresh = Simulator(lab.client, [ClusterPolicyHandler()])
    fresh.sync()
    assert ("ClusterPolicy", CLEANUP_KEY) in fresh.queue.pending()
    fresh.process_pending()
    assert lab.labels("h0") == {} and lab.gpus("h0") is None and lab.node_features() == set()


def test_disabled_operand_daemonset_is_deleted(lab):
    lab.policy("cluster-policy")
    lab.settle()
    lab.client.patch(
        "nvidia.com/v1", "ClusterPolicy", "cluster-policy", None, {"spec": {"dcgmExporter": {"enabled": False}}}
    )
    lab.settle()
    assert "nvidia-dcgm-exporter" not in lab.daemonsets() and lab.status()["state"] == "ready"


def test_gfd_disabled_removes_its_node_features(lab):
    lab.policy("cluster-policy")
    lab.settle()
    assert lab.gfd("h0") is not None and lab.gfd("h1") is not None
    lab.client.patch("nvidia.com/v1", "ClusterPolicy", "cluster-policy", None, {"spec": {"gfd": {"enabled": False}}})
    lab.settle()
    # the DaemonSet goes; its NodeFeatures with it (garbage collector; the handler deletes them too)
    assert "gpu-feature-discovery" not in lab.daemonsets() and lab.node_features() == set()
    assert lab.gpus("h0") == "8" and lab.labels("h0")["nvidia.com/gpu.present"] == "true"
    assert lab.status()["state"] == "ready"


def test_gfd_node_feature_is_republished_and_follows_nodes(lab):
    lab.policy("cluster-policy")
    lab.settle()
    published = lab.node_feature("h0")
    # someone deletes it: GFD writes it again (same labels, same timestamp is not required)
    lab.client.delete(*NF_API, "nvidia-features-for-h0", NS)
    lab.settle()
    assert lab.gfd("h0") is not None
    assert lab.node_feature("h0")["metadata"]["ownerReferences"] == published["metadata"]["ownerReferences"]
    # a node that is gone: its GFD NodeFeature goes (nfd-gc's part)
    lab.client.add(
        {
            "apiVersion": NODE_FEATURE.api_version,
            "kind": NODE_FEATURE.kind,
            "metadata": {"name": "nvidia-features-for-gone", "namespace": NS, "labels": {NODE_NAME_LABEL: "gone"}},
            "spec": {"labels": {"nvidia.com/gpu.product": "x"}},
        }
    )
    lab.sim.enqueue("ClusterPolicy", Key(None, "cluster-policy"))
    lab.settle()
    assert (NS, "nvidia-features-for-gone") not in lab.node_features()
    assert lab.node_features() == {(NS, "nvidia-features-for-h0"), (NS, "nvidia-features-for-h1")}


def test_node_feature_api_not_served_is_retried():
    lab = Lab()
    lab.client.not_served.add(NF_API)
    lab.node("h0", "dgx-h100")
    lab.policy("cluster-policy")
    lab.settle()
    assert lab.gpus("h0") == "8" and lab.status()["state"] == "ready"
    assert lab.gfd("h0") is None
    lab.client.not_served.discard(NF_API)
    lab.sim.enqueue("ClusterPolicy", Key(None, "cluster-policy"))
    lab.settle()
    assert lab.gfd("h0")["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_instances_do_not_touch_each_others_objects():
    lab = Lab()
    test_handler = ClusterPolicyHandler(instance="t1", operator_namespace="t1")
    lab.client.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t1"}})
    lab.sim = Simulator(lab.client, [lab.handler, test_handler])
    lab.node("lab-h", "dgx-h100")
    lab.node("test-h", "dgx-h100", labels={INSTANCE_LABEL: "t1"})
    lab.policy("cluster-policy")
    lab.policy("test-cp", labels={INSTANCE_LABEL: "t1"})
    lab.settle()
    # each instance: its own ClusterPolicy is active (neither ignored), its own node, its own DaemonSets
    assert lab.status()["state"] == "ready" and lab.status("test-cp")["state"] == "ready"
    assert lab.status("test-cp")["namespace"] == "t1"
    annotations = {n: lab.client.obj("v1", "Node", n)["metadata"]["annotations"] for n in ("lab-h", "test-h")}
    assert annotations["lab-h"][NODE_OWNER_ANNOTATION] == "default"
    assert annotations["test-h"][NODE_OWNER_ANNOTATION] == "t1"
    pods = {(k.namespace, p["spec"]["nodeName"]) for k, p in lab.client.objects[("v1", "Pod")].items()}
    assert pods == {(NS, "lab-h"), ("t1", "test-h")}
    assert lab.gpus("lab-h") == "8" and lab.gpus("test-h") == "8"
    assert lab.node_features() == {(NS, "nvidia-features-for-lab-h"), ("t1", "nvidia-features-for-test-h")}
    # a node moving to the test instance is released by the lab's and taken by the test's
    lab.client.patch("v1", "Node", "lab-h", None, {"metadata": {"labels": {INSTANCE_LABEL: "t1"}}})
    lab.settle(8)
    assert lab.client.obj("v1", "Node", "lab-h")["metadata"]["annotations"][NODE_OWNER_ANNOTATION] == "t1"
    assert {k.namespace for k, p in lab.client.objects[("v1", "Pod")].items() if p["spec"]["nodeName"] == "lab-h"} == {
        "t1"
    }
    assert lab.gpus("lab-h") == "8" and lab.status()["state"] == "ready"
    assert lab.condition("Ready")["reason"] == "NFDLabelsMissing"  # the lab instance has no node left
    assert lab.node_features() == {("t1", "nvidia-features-for-lab-h"), ("t1", "nvidia-features-for-test-h")}


def test_operator_namespace_annotation_and_missing_namespace(lab):
    lab.policy("cluster-policy", annotations={OPERATOR_NAMESPACE_ANNOTATION: "elsewhere"})
    lab.settle()
    assert lab.status()["state"] == "notReady"
    assert lab.condition("Error")["reason"] == "ReconcileFailed"
    assert "elsewhere" in lab.condition("Error")["message"]
    lab.client.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
    lab.sim.enqueue("ClusterPolicy", Key(None, "cluster-policy"))
    lab.settle()
    assert lab.status() | {"conditions": None} == {"state": "ready", "namespace": "elsewhere", "conditions": None}
    assert {k.namespace for k in lab.client.objects[("apps/v1", "DaemonSet")]} == {"elsewhere"}


def test_operator_namespace_from_the_operator_deployment():
    lab = Lab(namespace="nvidia-gpu-operator")
    lab.node("h0", "dgx-h100")
    lab.client.add(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "gpu-operator",
                "namespace": "nvidia-gpu-operator",
                "labels": {"app.kubernetes.io/component": "gpu-operator"},
            },
            "spec": {},
        }
    )
    lab.policy("cluster-policy")
    lab.settle()
    assert lab.status()["namespace"] == "nvidia-gpu-operator" and lab.gpus("h0") == "8"


def test_crd_not_served_is_harmless():
    lab = Lab()
    lab.client.not_served.add(("nvidia.com/v1", "ClusterPolicy"))
    lab.node("h0", "dgx-h100")
    lab.settle()
    assert lab.labels("h0") == {} and lab.client.writes == []

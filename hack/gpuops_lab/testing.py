"""pytest fixtures of the local lab (a real control plane), shared by the product's integration tests
(tests/conftest.py) and the lab's own (hack/tests/conftest.py): `cluster`, `core`, `namespace`,
`add_nodes`, `volcano_release`; `snapshot`, what the playbooks can write, and `site_run`, to prove a run changed
nothing."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

# written by controllers on their own schedule, not by a playbook (NodeFeature: the lab's nfd-worker stand-in)
# ComponentStatus is no stored object: the API server probes the scheduler and controller-manager on each read
VOLATILE = {"Event", "Lease", "Endpoints", "EndpointSlice", "Pod", "NodeFeature", "ComponentStatus"}
# node labels and annotations NFD's master writes from the NodeFeatures, on its own schedule (an earlier test that
# removed and restored the NFD CRDs has it relabel the nodes for a while); no playbook of the collection writes them
NFD_OWNED = ("feature.node.kubernetes.io/", "nfd.node.kubernetes.io/")


def _not_nfd(meta: dict) -> dict:
    return {k: v for k, v in meta.items() if not k.startswith(NFD_OWNED)}


def _node_meta(labels: dict | None, annotations: dict | None) -> str:
    """What snapshot() and settle_nodes() compare of a Node: its labels and annotations but NFD's."""
    return json.dumps([_not_nfd(labels or {}), _not_nfd(annotations or {})], sort_keys=True)


def snapshot(api_client: Any) -> dict[tuple[str, str, str], str]:
    """Every object of every listable kind (but VOLATILE), keyed by (apiVersion/kind, namespace, name), valued by what
    a playbook writes - metadata labels, annotations and owners, spec, data - not status or resourceVersion; Nodes by
    their labels and annotations (kwok's heartbeats move everything else)."""
    from kubernetes import dynamic

    dyn = dynamic.DynamicClient(api_client)
    out: dict[tuple[str, str, str], str] = {}
    for res in dyn.resources.search():
        verbs = getattr(res, "verbs", None) or []
        if "list" not in verbs or "/" in (res.name or "") or res.kind in VOLATILE or res.kind.endswith("List"):
            continue
        try:
            items = dyn.get(res).items
        except Exception:  # noqa: BLE001 - an aggregated or review-only kind without a usable list: not ours
            continue
        for it in items:
            meta = it.metadata
            key = (f"{res.group_version}/{res.kind}", meta.namespace or "", meta.name)
            if res.kind == "Node":
                out[key] = _node_meta(meta.labels, meta.annotations)
            else:
                # what a playbook writes (metadata labels and annotations, spec, data), not the resourceVersion: the
                # lab's controllers and earlier tests' operators keep writing status in the shared lab
                body = it.to_dict()
                body.pop("status", None)
                kept = body.pop("metadata", {}) or {}
                body["metadata"] = {k: kept.get(k) for k in ("labels", "annotations", "ownerReferences")}
                out[key] = json.dumps(body, sort_keys=True, default=str)
    return out


def site_run(cluster: Any, tmp_path: Any, extra: dict[str, Any], *args: str) -> tuple[Any, dict[Any, Any]]:
    """`ansible-playbook site.yml -i inventories/local -e @extra ARGS` on the session's lab, between two snapshots:
    (the finished process, every object the run changed as {key: (before, after)}). An object of a namespace an
    earlier test left terminating, gone during the run by the namespace controller, is not the run's change."""
    import subprocess

    from kubernetes import client

    from .config import REPO

    extra_file = tmp_path / "extra.json"
    extra_file.write_text(json.dumps(extra))
    env = {
        **os.environ,
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "GPUOPS_LAB_STATE": str(cluster.cfg.state),
    }
    core = client.CoreV1Api(cluster.api_client)
    going = {n.metadata.name for n in core.list_namespace().items if n.metadata.deletion_timestamp is not None}
    before = snapshot(cluster.api_client)
    r = subprocess.run(
        ["ansible-playbook", "site.yml", "-i", "inventories/local", *args, "-e", f"@{extra_file}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    after = snapshot(cluster.api_client)
    changed = {
        k: (before.get(k), after.get(k))
        for k in before.keys() | after.keys()
        if before.get(k) != after.get(k) and not (k in before and k not in after and (k[1] or k[2]) in going)
    }
    return r, changed


@dataclass
class Cluster:
    lab: object
    cfg: object
    kubeconfig: str
    api_client: object
    chart_repo_url: str


def dgx_and_l40s(root: Any) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Two fresh simulated hosts under ``root`` as the host-plane tests use them: ``dgx`` (dgx-h100, host
    driver 570.124.06 loaded, no fabricmanager; host_prep_nvidia_driver: host) and ``l40s`` (pcie-l40s, nouveau
    loaded; host_prep_gpudirect: false). Returns (what create_host made, per host, their inventory hostvars)."""
    from .hostsim.hosts import create_host

    made = {"dgx": create_host("dgx-h100", "dgx", root), "l40s": create_host("pcie-l40s", "l40s", root)}
    hostvars = {name: dict(info["hostvars"]) for name, info in made.items()}
    hostvars["dgx"]["host_prep_nvidia_driver"] = "host"
    hostvars["l40s"]["host_prep_gpudirect"] = False
    return made, hostvars


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The local control plane, started once per session (reused when already up). Never skips: when
    the lab cannot start, every test that needs it errors with the reason (which component, its log)."""
    from kubernetes import config

    from .cluster import Lab
    from .config import LabConfig

    cfg = LabConfig.load()
    lab = Lab(cfg, say=lambda m: print(m, file=sys.stderr))
    lab.up()
    api = config.new_client_from_config(str(cfg.kubeconfig))
    yield Cluster(lab, cfg, str(cfg.kubeconfig), api, cfg.chart_repo_url)
    lab.check()  # a component that died during the session fails the run, naming its log


@pytest.fixture(scope="module")
def volcano_release(cluster: Cluster) -> Iterator[str]:
    """Volcano from its upstream chart (the lab's own release in volcano-system: its scheduler, controller-manager and
    admission webhook run by the lab's kubelet), for one test module; uninstalled after it (its CRDs, and every Volcano
    object, go with the release). Returns the namespace."""
    from . import volcano

    volcano.install(cluster.cfg)
    yield volcano.NAMESPACE
    volcano.uninstall(cluster.cfg)


@pytest.fixture
def core(cluster: Cluster):
    from kubernetes import client

    return client.CoreV1Api(cluster.api_client)


@pytest.fixture
def namespace(cluster: Cluster, core) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    cluster.lab.wait_namespace_sa(name)
    yield name
    core.delete_namespace(name)


@pytest.fixture
def add_nodes(cluster: Cluster, core) -> Iterator[Callable[..., list[str]]]:
    """add_nodes(profile, count) -> names: simulated nodes, returned once nfd-master has labelled them from
    the NodeFeatures the simulator publishes (about a second; `labelled=False` returns at once; `settled=True` also
    waits until nothing writes their labels and annotations any more, see settle_nodes), removed
    after the test. The wait allows 90 s: after a test's uninstall deleted the NFD CRDs, nfd-master's client-go
    reflectors back off (up to about 30 s plus jitter) before they list the recreated kinds again."""
    from . import nodes
    from .k8s import wait_for

    made: list[str] = []

    def _add(
        profile: str, count: int = 1, labelled: bool = True, timeout: float = 90.0, settled: bool = False
    ) -> list[str]:
        names = nodes.add(core, profile, count, prefix=f"t{uuid.uuid4().hex[:6]}-{profile}")
        made.extend(names)
        if labelled and not wait_for(lambda: all(nodes.labelled(core.read_node(n)) for n in names), timeout):
            raise AssertionError(
                f"nfd-master did not label {names} within {timeout}s: see the lab's nfd-master and simulator logs "
                f"in {cluster.cfg.logs}"
            )
        if settled:
            settle_nodes(core, names, timeout=timeout)
        return names

    yield _add
    nodes.remove(core, made)


def settle_nodes(core: Any, names: list[str], quiet: float = 5.0, timeout: float = 90.0) -> None:
    """Wait until the labels and annotations of these nodes (as snapshot() compares them) stay the same for `quiet`
    seconds: the lab's controllers and the simulator's handlers (an operator an earlier test left installed labels
    every new node) write new nodes on their own schedule, so a snapshot taken before they are done would count
    their writes as the test's."""
    wanted = set(names)

    def meta() -> dict[str, str]:
        listed = json.loads(core.list_node(_preload_content=False).data)["items"]
        return {
            n["metadata"]["name"]: _node_meta(n["metadata"].get("labels"), n["metadata"].get("annotations"))
            for n in listed
            if n["metadata"]["name"] in wanted
        }

    deadline = time.monotonic() + timeout
    last, since = meta(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError(f"the labels or annotations of {sorted(wanted)} still changed after {timeout}s")
        time.sleep(0.5)
        now = meta()
        if now != last:
            last, since = now, time.monotonic()


def node_events(core: Any, node: str) -> dict[str, list[str]]:
    """The Events on a Node (namespace default), their messages by reason."""
    got = core.list_namespaced_event("default", field_selector=f"involvedObject.kind=Node,involvedObject.name={node}")
    out: dict[str, list[str]] = {}
    for e in got.items:
        out.setdefault(e.reason, []).append(e.message)
    return out


@contextlib.contextmanager
def gpu_alerting(
    cluster: Cluster,
    fleet: tuple[tuple[str, int], ...] = (("dgx-h100", 2), ("pcie-l40s", 1)),
    thresholds: dict[str, str] | None = None,
) -> Iterator[Any]:
    """The GPU alert chain on the lab, for the alert tests and the remediation benchmark: simulated GPU nodes (fleet:
    (hardware profile, count) pairs) in a fresh namespace with their own ClusterPolicy simulator instance (its
    dcgm-exporter ServiceMonitor), the collection's GPU alert rules (module_utils/_gpu_alerts.py, with thresholds),
    and the lab's monitoring scraping them (started here unless it runs, then stopped again). Yields {cfg, core,
    namespace, nodes, expected_gpus}; everything made is removed afterwards."""
    from types import SimpleNamespace

    from kubernetes import client

    from . import dcgm, monitoring, profiles
    from . import nodes as lab_nodes
    from .config import REPO
    from .k8s import ensure_crd, wait_for
    from .simulator.framework import RealClient, Simulator
    from .simulator.handlers.nvidia import INSTANCE_LABEL, ClusterPolicyHandler

    sys.path.insert(0, str(REPO / ".state" / "collections"))
    from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts as ga

    cfg: Any = cluster.cfg
    api: Any = cluster.api_client
    lab: Any = cluster.lab
    core = client.CoreV1Api(api)
    charts = REPO / "tests" / "fixtures" / "charts"
    for crd in (
        charts / "gpu-operator/v26.7.0/crds/nvidia.com_clusterpolicies.yaml",
        *sorted((charts / "kube-prometheus-stack/crds").glob("*.yaml")),
    ):
        ensure_crd(api, crd)
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    made: list[str] = []
    sim = None
    custom = client.CustomObjectsApi(api)
    policy = f"{namespace}-policy"
    started_monitoring = not all(monitoring.status(cfg).values())
    try:
        lab.wait_namespace_sa(namespace)
        for profile, count in fleet:
            made += lab_nodes.add(core, profile, count, prefix=f"t{uuid.uuid4().hex[:6]}-{profile}")
        nodes = list(made)
        assert wait_for(lambda: all(lab_nodes.labelled(core.read_node(n)) for n in nodes), 180), (
            f"nfd-master did not label the {len(nodes)} nodes within 180s"
        )
        for name in nodes:
            core.patch_node(name, {"metadata": {"labels": {INSTANCE_LABEL: namespace}}})
        expected_gpus = sum(
            len(dcgm.gpus_of(n, profiles.load(core.read_node(n).metadata.labels[profiles.PROFILE_LABEL])))
            for n in nodes
        )
        handler = ClusterPolicyHandler(instance=namespace, operator_namespace=namespace)
        sim = Simulator(RealClient.from_kubeconfig(cluster.kubeconfig), [handler], resync_period=2.0, watch_timeout=30)
        sim.start()
        assert sim.wait_ready(30), "simulator watches not established within 30s"
        custom.create_cluster_custom_object(
            "nvidia.com",
            "v1",
            "clusterpolicies",
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": policy, "labels": {INSTANCE_LABEL: namespace}},
                "spec": {
                    **{k: {} for k in ("daemonsets", "devicePlugin", "gfd", "operator")},
                    "driver": {"enabled": True, "version": "580.126.20"},
                    "toolkit": {"enabled": True},
                    "dcgm": {"enabled": False},
                    "nodeStatusExporter": {"enabled": False},
                    "dcgmExporter": {"serviceMonitor": {"enabled": True}},
                },
            },
        )
        rule = ga.prometheus_rule(
            thresholds or {}, "gpuops-gpu-alerts", namespace, {"release": "kube-prometheus-stack"}
        )
        custom.create_namespaced_custom_object("monitoring.coreos.com", "v1", namespace, "prometheusrules", rule)
        monitoring.start(cfg, say=lambda m: print(m, file=sys.stderr))
        job = f"serviceMonitor/{namespace}/nvidia-dcgm-exporter/0"

        def synced() -> Any:
            res = monitoring.sync(cfg, api)
            return res if res.jobs.get(job) == len(nodes) else None

        res = wait_for(synced, 180, 2.0)
        assert res, f"no {len(nodes)} targets for {job}: {monitoring.sync(cfg, api)}"
        assert f"{namespace}-gpuops-gpu-alerts.yaml" in res.rules
        assert set(nodes) <= set(res.exporter_nodes)
        yield SimpleNamespace(cfg=cfg, core=core, namespace=namespace, nodes=nodes, expected_gpus=expected_gpus)
    finally:
        for n in made:
            dcgm.clear(cfg.state, n)
        try:
            custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", policy)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        wait_for(lambda: not client.AppsV1Api(api).list_namespaced_daemon_set(namespace).items, 60)
        if sim is not None:
            sim.stop()
        if started_monitoring:
            monitoring.stop(cfg)
        lab_nodes.remove(core, made)
        core.delete_namespace(namespace)

"""Gang scheduling and queue capability through the real Volcano v1.15.1 of the lab, installed by upstream's chart (the
`volcano_release` fixture; the lab's kubelet runs vc-scheduler with the chart's default configuration - enqueue,
allocate, backfill; gang, proportion, overcommit, predicates... -, vc-controller-manager with the chart's controllers,
and vc-webhook-manager, whose webhooks default and validate every Volcano object below). Nothing of Volcano is
simulated; kwok runs the pods it binds. The gang and queue tests make their PodGroups themselves (as the job controller
does for a vcjob); the controller-manager opens new Queues, and Volcano's webhook admits a PodGroup only into an open
Queue, so a test waits for its Queue to open as a user must.

- all or nothing: a PodGroup of 3 pods x 8 GPUs on two 8-GPU nodes has no pod bound and never runs over many
  scheduling cycles; once a third node advertises 8 GPUs the three pods are bound together and the group runs;
- a PodGroup that fits (2 x 8 GPUs) is bound at once, runs, and kwok runs its pods;
- queue capability: a Queue capped at 4 GPUs keeps a PodGroup that needs 8 Pending (never Inqueue) while one that
  needs 4 is admitted to the same Queue and runs; the queue controller opened it and made `root` its parent;
- the controller-manager's own part: a bare `schedulerName: volcano` pod (no PodGroup) gets one from the podgroup
  controller (`podgroup-<pod uid>`, owned by the pod, the pod annotated with it) and is scheduled; a Volcano Job
  (vcjob) of 2 x 8 GPUs becomes a PodGroup and two pods through the job controller, bound together, and Completed
  once kwok has run its pods to the end.

The GPUs: nodes of the dgx-h100 profile made by the test (removed after it) whose status gets `nvidia.com/gpu: 8` as a
device plugin would report it (as hack/tests/integration/test_control_plane.py does for the default scheduler), instead
of installing the GPU Operator on the lab's inventory nodes; the pods select the test's nodes by label, so nodes of
other tests never take part."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from gpuops_lab.k8s import wait_for
from kubernetes import client

SCHEDULING = ("scheduling.volcano.sh", "v1beta1")
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
INSTANCE = "gpuops.test/instance"
KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
GPUS = {"nvidia.com/gpu": "8"}
CYCLES = 10  # seconds watched: vc-scheduler runs a scheduling cycle every second (--schedule-period 1s)


@pytest.fixture(scope="module", autouse=True)
def _volcano(volcano_release):
    return volcano_release


@pytest.fixture
def custom(cluster, core, namespace):
    """The custom objects API; afterwards the test's PodGroups and pods are deleted and waited for. The scheduler's
    enqueue checks (overcommit) count every Inqueue PodGroup of the cluster, so none may outlive its test while its
    namespace is being deleted."""
    api = client.CustomObjectsApi(cluster.api_client)
    yield api
    api.delete_collection_namespaced_custom_object(*SCHEDULING, namespace, "podgroups")
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    gone = wait_for(
        lambda: (
            not api.list_namespaced_custom_object(*SCHEDULING, namespace, "podgroups")["items"]
            and not core.list_namespaced_pod(namespace).items
        ),
        30,
    )
    assert gone, f"the PodGroups and pods of {namespace} are still there after 30 s"


@pytest.fixture
def gpu_nodes(cluster, core, namespace, add_nodes):
    """gpu_nodes(n, advertise=n) -> names: n dgx-h100 nodes of this test (label gpuops.test/instance=<namespace>),
    the first `advertise` of them with 8 allocatable GPUs."""

    def make(n: int, advertise: int | None = None) -> list[str]:
        names = add_nodes("dgx-h100", n)
        for name in names:
            core.patch_node(name, {"metadata": {"labels": {INSTANCE: namespace}}})
        for name in names[: n if advertise is None else advertise]:
            advertise_gpus(core, name)
        return names

    return make


def advertise_gpus(core, node: str) -> None:
    core.patch_node_status(node, {"status": {"capacity": GPUS, "allocatable": GPUS}})
    assert wait_for(lambda: (core.read_node(node).status.allocatable or {}).get("nvidia.com/gpu") == "8", 10)


def podgroup(name: str, queue: str, min_member: int, min_gpus: int | None = None) -> dict:
    spec: dict = {"queue": queue, "minMember": min_member}
    if min_gpus is not None:
        spec["minResources"] = {"nvidia.com/gpu": str(min_gpus)}
    return {"apiVersion": "/".join(SCHEDULING), "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def pod(name: str, group: str, gpus: int, instance: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {GROUP_ANNOTATION: group}, "labels": {"group": group}},
        "spec": {
            "schedulerName": "volcano",
            "nodeSelector": {INSTANCE: instance},
            "tolerations": KWOK,
            "containers": [
                {
                    "name": "train",
                    "image": "registry.invalid/train:1",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


def submit(core, custom, namespace: str, group: dict, pods: int, gpus: int) -> list[str]:
    """The PodGroup, then its pods (what Volcano's job controller does for a vcjob)."""
    name = group["metadata"]["name"]
    custom.create_namespaced_custom_object(*SCHEDULING, namespace, "podgroups", group)
    names = [f"{name}-{i}" for i in range(pods)]
    for p in names:
        core.create_namespaced_pod(namespace, pod(p, name, gpus, namespace))
    return names


def phase(custom, namespace: str, group: str) -> str:
    pg = custom.get_namespaced_custom_object(*SCHEDULING, namespace, "podgroups", group)
    return (pg.get("status") or {}).get("phase") or ""


def conditions(custom, namespace: str, group: str) -> list[dict]:
    pg = custom.get_namespaced_custom_object(*SCHEDULING, namespace, "podgroups", group)
    return (pg.get("status") or {}).get("conditions") or []


def bound(core, namespace: str, pods: list[str]) -> dict[str, str | None]:
    return {p: core.read_namespaced_pod(p, namespace).spec.node_name for p in pods}


def watch(custom, core, namespace: str, group: str, pods: list[str], seconds: float = CYCLES) -> list[str]:
    """The phases the PodGroup shows over `seconds`, failing at once if any of its pods is bound."""
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = phase(custom, namespace, group)
        if not seen or seen[-1] != now:
            seen.append(now)
        nodes = bound(core, namespace, pods)
        assert not any(nodes.values()), f"{group}: pods bound although the group cannot run whole: {nodes}"
        time.sleep(0.5)
    return seen


def logs_hint(cluster) -> str:
    return f"see {cluster.cfg.logs}/volcano-scheduler.log, volcano-controller.log and volcano-admission.log"


def test_a_gang_that_does_not_fit_binds_no_pod_until_it_fits(cluster, core, custom, namespace, gpu_nodes):
    nodes = gpu_nodes(3, advertise=2)  # 16 GPUs for a gang of 3 x 8
    pods = submit(core, custom, namespace, podgroup("big", "default", 3), pods=3, gpus=8)

    full_gang = re.compile(r"\d/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable")

    def gang_unschedulable():
        # vc-scheduler may first judge the group while the pods are still being created ("x/2 tasks ...,
        # 2 Pending, 3 minAvailable"): wait for its verdict on the whole gang of three
        return [
            c
            for c in conditions(custom, namespace, "big")
            if c.get("type") == "Unschedulable" and full_gang.match(c.get("message", ""))
        ]

    # vc-scheduler looked at it: the gang plugin records why the group cannot be placed
    cond = wait_for(gang_unschedulable, 30)
    assert cond, (
        f"no Unschedulable condition for the whole gang on PodGroup big: {conditions(custom, namespace, 'big')}; "
        f"{logs_hint(cluster)}"
    )
    assert cond[0]["status"] == "True" and cond[0]["reason"] == "NotEnoughResources", cond
    seen = watch(custom, core, namespace, "big", pods)
    assert set(seen) <= {"Pending", "Inqueue"} and seen[-1] in ("Pending", "Inqueue"), seen
    # the third node advertises its GPUs: the three pods are bound together, one per node
    advertise_gpus(core, nodes[2])
    assert wait_for(lambda: all(bound(core, namespace, pods).values()), 30), bound(core, namespace, pods)
    assert sorted(bound(core, namespace, pods).values()) == sorted(nodes)
    assert wait_for(lambda: phase(custom, namespace, "big") == "Running", 30), phase(custom, namespace, "big")


def test_a_gang_that_fits_is_bound_and_runs(cluster, core, custom, namespace, gpu_nodes):
    queues = {q["metadata"]["name"]: q for q in custom.list_cluster_custom_object(*SCHEDULING, "queues")["items"]}
    assert {"default", "root"} <= set(queues), f"vc-scheduler made no default/root Queue: {sorted(queues)}"
    assert wait_for(
        lambda: (
            custom.get_cluster_custom_object(*SCHEDULING, "queues", "default").get("status", {}).get("state") == "Open"
        ),
        30,
    ), f"the default Queue is not Open; {logs_hint(cluster)}"
    nodes = gpu_nodes(2)
    pods = submit(core, custom, namespace, podgroup("fits", "default", 2, min_gpus=16), pods=2, gpus=8)
    assert wait_for(lambda: all(bound(core, namespace, pods).values()), 30), (
        f"{bound(core, namespace, pods)}, PodGroup phase {phase(custom, namespace, 'fits')!r}; {logs_hint(cluster)}"
    )
    assert sorted(bound(core, namespace, pods).values()) == sorted(nodes)
    for p in pods:
        assert core.read_namespaced_pod(p, namespace).spec.scheduler_name == "volcano"
    assert wait_for(lambda: phase(custom, namespace, "fits") == "Running", 30), phase(custom, namespace, "fits")
    # kwok runs the pods vc-scheduler bound, as it runs the default scheduler's
    assert wait_for(lambda: all(core.read_namespaced_pod(p, namespace).status.phase == "Running" for p in pods), 30), {
        p: core.read_namespaced_pod(p, namespace).status.phase for p in pods
    }


@pytest.fixture
def capped_queue(custom):  # after `custom`: the queue goes once the test's PodGroups are gone
    """A Queue of this test with a capability of 4 GPUs, deleted afterwards."""
    name = f"cap-{uuid.uuid4().hex[:6]}"
    queue = {
        "apiVersion": "/".join(SCHEDULING),
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": False, "capability": {"nvidia.com/gpu": "4"}},
    }
    custom.create_cluster_custom_object(*SCHEDULING, "queues", queue)
    yield name
    custom.delete_cluster_custom_object(*SCHEDULING, "queues", name)


def test_a_queue_capability_keeps_a_larger_group_pending(cluster, core, custom, namespace, gpu_nodes, capped_queue):
    gpu_nodes(2)

    def state():
        return (custom.get_cluster_custom_object(*SCHEDULING, "queues", capped_queue).get("status") or {}).get("state")

    assert wait_for(lambda: state() == "Open", 30), f"Queue {capped_queue} state {state()!r}; {logs_hint(cluster)}"
    # the queue controller's other step for a Queue that names no parent
    assert custom.get_cluster_custom_object(*SCHEDULING, "queues", capped_queue)["spec"].get("parent") == "root"
    over = submit(core, custom, namespace, podgroup("over", capped_queue, 2, min_gpus=8), pods=2, gpus=4)
    # the enqueue action looks at it every cycle and leaves it Pending: 8 GPUs > the queue's 4
    assert wait_for(lambda: phase(custom, namespace, "over") == "Pending", 30), phase(custom, namespace, "over")
    seen = watch(custom, core, namespace, "over", over)
    assert seen == ["Pending"], seen

    def quota_events():
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=over").items
        return [e.message for e in events if e.reason == "Unschedulable"]

    # ...because of the queue's capability (proportion's enqueue check), not a closed queue
    assert "queue resource quota insufficient: insufficient nvidia.com/gpu" in (wait_for(quota_events, 10) or []), (
        quota_events()
    )
    # the same queue admits a group within its capability: it is open and its capability is what holds the other
    within = submit(core, custom, namespace, podgroup("within", capped_queue, 1, min_gpus=4), pods=1, gpus=4)
    assert wait_for(lambda: all(bound(core, namespace, within).values()), 30), (
        f"{bound(core, namespace, within)}, phase {phase(custom, namespace, 'within')!r}; {logs_hint(cluster)}"
    )
    assert wait_for(lambda: phase(custom, namespace, "within") == "Running", 30), phase(custom, namespace, "within")
    seen = watch(custom, core, namespace, "over", over, seconds=3)
    assert seen == ["Pending"], seen
    queue = custom.get_cluster_custom_object(*SCHEDULING, "queues", capped_queue)
    assert (queue.get("status") or {}).get("allocated", {}).get("nvidia.com/gpu") == "4", queue.get("status")


def test_a_bare_volcano_pod_gets_a_podgroup_from_the_controller_manager(cluster, core, custom, namespace, gpu_nodes):
    (node,) = gpu_nodes(1)
    spec = pod("bare", "bare", 8, namespace)
    del spec["metadata"]["annotations"]  # no PodGroup: the podgroup controller makes one
    created = core.create_namespaced_pod(namespace, spec)
    group = f"podgroup-{created.metadata.uid}"

    def annotated() -> str | None:
        return (core.read_namespaced_pod("bare", namespace).metadata.annotations or {}).get(GROUP_ANNOTATION)

    assert wait_for(annotated, 30) == group, f"pod annotation {annotated()!r}; {logs_hint(cluster)}"
    pg = custom.get_namespaced_custom_object(*SCHEDULING, namespace, "podgroups", group)
    assert pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == "default", pg["spec"]
    assert [(o["kind"], o["name"]) for o in pg["metadata"]["ownerReferences"]] == [("Pod", "bare")]
    assert wait_for(lambda: bound(core, namespace, ["bare"])["bare"], 30) == node, (
        f"{bound(core, namespace, ['bare'])}, phase {phase(custom, namespace, group)!r}; {logs_hint(cluster)}"
    )
    assert wait_for(lambda: core.read_namespaced_pod("bare", namespace).status.phase == "Running", 30)


BATCH = ("batch.volcano.sh", "v1alpha1")


@pytest.fixture
def vcjobs(custom, namespace):  # after `custom`: the jobs go before their PodGroups and pods are waited for
    """The custom objects API for this test's Volcano Jobs, deleted (and waited for) afterwards."""
    yield custom
    custom.delete_collection_namespaced_custom_object(*BATCH, namespace, "jobs")
    assert wait_for(lambda: not custom.list_namespaced_custom_object(*BATCH, namespace, "jobs")["items"], 30)


def test_a_vcjob_becomes_a_gang_through_the_job_controller(cluster, core, vcjobs, namespace, gpu_nodes):
    nodes = gpu_nodes(2)
    template = pod("-", "-", 8, namespace)
    del template["metadata"]
    job = {  # complete as Volcano's webhook would leave it (not run in the lab): queue, minAvailable, a named task
        "apiVersion": "/".join(BATCH),
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": 2,
            "tasks": [{"name": "worker", "replicas": 2, "template": template}],
        },
    }
    created = vcjobs.create_namespaced_custom_object(*BATCH, namespace, "jobs", job)
    group = f"train-{created['metadata']['uid']}"
    pods = ["train-worker-0", "train-worker-1"]

    def made() -> bool:
        return {p.metadata.name for p in core.list_namespaced_pod(namespace).items} == set(pods)

    assert wait_for(made, 30), f"pods {[p.metadata.name for p in core.list_namespaced_pod(namespace).items]}; " + (
        logs_hint(cluster)
    )
    pg = vcjobs.get_namespaced_custom_object(*SCHEDULING, namespace, "podgroups", group)
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["queue"] == "default", pg["spec"]
    for p in pods:
        assert core.read_namespaced_pod(p, namespace).metadata.annotations[GROUP_ANNOTATION] == group
    assert wait_for(lambda: all(bound(core, namespace, pods).values()), 30), bound(core, namespace, pods)
    assert sorted(bound(core, namespace, pods).values()) == sorted(nodes)

    def job_phase() -> str:
        got = vcjobs.get_namespaced_custom_object(*BATCH, namespace, "jobs", "train")
        return ((got.get("status") or {}).get("state") or {}).get("phase") or ""

    # kwok's pod-complete stage ends the pods of a Job (owner kind Job: a vcjob too) at once: the job controller sees
    # both pods Succeeded and completes the vcjob
    assert wait_for(lambda: job_phase() == "Completed", 30), f"vcjob phase {job_phase()!r}; {logs_hint(cluster)}"
    assert {core.read_namespaced_pod(p, namespace).status.phase for p in pods} == {"Succeeded"}

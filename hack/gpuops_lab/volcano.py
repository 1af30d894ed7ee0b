"""Volcano in the lab: the real scheduler (volcano.sh/volcano v1.15.1, cmd/scheduler = vc-scheduler, built by
hack/cluster/build.sh against volcano.sh/apis v1.14.0 plus one constant) runs out of cluster against the lab's API
server and schedules pods whose `schedulerName` is `volcano` for real: gang scheduling of PodGroups (minMember),
queues (capability, proportion), enqueue gating; kwok runs the pods it binds, as it runs the default scheduler's.

What it needs (checked against v1.15.1):
- Volcano's CRDs (config/crd/volcano/bases, copied beside the binary at build time: read from the build cache, never
  committed) before it starts: its informers wait for PodGroups, Queues, HyperNodes and Numatopologies (the
  ResourceTopology gate is on by default; NodeShards only with sharding, off). The lab installs those four, and
  batch.volcano.sh Jobs and bus.volcano.sh Commands for the controller-manager (below; :data:`CRDS`), not the other
  kinds of the bases (CronJobs, ColocationConfigurations, NodeShards: controllers the lab leaves off, and the agent's):
  each CRD is a large OpenAPI schema the API server compiles, and all nine took 4.8 s of `up` against 1.9 s for the
  first five (Commands is 4 KB);
- a scheduler configuration (`--scheduler-conf`): the chart's default (installer/helm/chart/volcano/config/
  volcano-scheduler.conf: actions enqueue, allocate, backfill; plugins priority, gang, conformance | overcommit, drf,
  predicates, proportion, nodeorder, binpack), kept beside the binary at build time and copied into its own directory
  of the state (`volcano/`: the scheduler watches the configuration's directory and reloads it on every write). No
  `--disable-default-scheduler-config`, as in the chart: with it, a read that catches the file half-written (an editor,
  `cp`) is fatal (checked: `cp` over the file killed the scheduler); without it an invalid configuration is logged and
  the previous one kept;
- every listener on loopback: `--listen-address` (metrics; upstream default `:8080`) and `--healthz-address` (upstream
  default `:11251`); the klog level socket (a unix socket, `DEBUG_SOCKET_DIR`, upstream `/tmp/klog-socks`, shared by
  every process on the host) and the cache dumper's directory (`--cache-dump-dir`, upstream `/tmp`) in the state;
- leader election off; `--scheduler-name=volcano` (upstream's default, said explicitly).

At start (pkg/scheduler/cache/cache.go newDefaultAndRootQueue, before its servers listen) it creates the Queues
`root` and `default` (weight 1, default reclaimable) when they are missing.

Volcano's controller-manager (cmd/controller-manager = vc-controller-manager, built from the same copy) runs out of
cluster too, after the scheduler. It opens Queues (the queue controller: an empty `status.state` is synced to `Open`,
`spec.parent: root` set where a Queue names none; the scheduler allocates only into open Queues), gives a bare
`schedulerName: volcano` pod a PodGroup of its own (the podgroup controller: `podgroup-<pod uid>`, minMember 1, the
pod annotated `scheduling.k8s.io/group-name`), turns Volcano Jobs (vcjob) into a PodGroup and pods (the job
controller) and deletes finished vcjobs past their `ttlSecondsAfterFinished` (the garbage collector). What it needs
(checked against v1.15.1, cmd/controller-manager/app/options/options.go and pkg/controllers):
- only those four controllers (`--controllers=+queue-controller,+pg-controller,+job-controller,+gc-controller`: with
  no `*` in the list, only the named ones start; upstream's default is `*,-sharding-controller`). Left off: the
  cronjob, jobflow and jobtemplate controllers (their CRDs: CronJobs, flow.volcano.sh JobFlows/JobTemplates - the
  lab does not install them, and the controllers share one informer factory, so one kind not served would hold
  every controller's cache sync), the hyperNode controller (network-topology discovery from a ConfigMap in
  volcano-system; the lab has no topology), the colocation-config controller (the agent's ColocationConfigurations),
  the sharding controller (off upstream too);
- the bus.volcano.sh Commands CRD besides the scheduler's: the QueueCommandSync feature gate (on by default) makes
  the queue and job controllers watch Commands (`vcctl queue close`, `vcctl job suspend`); PodGroups, Queues and
  vcjobs are installed for the scheduler already. The podgroup and job controllers' other informers are built-in kinds
  (pods, ReplicaSets, StatefulSets, PVCs, Services, PriorityClasses);
- every listener on loopback: `--healthz-address` (upstream default `:11251`, the scheduler's default too) and
  `--listen-address` (metrics, upstream default `:8081`), both enabled (off by default upstream); it opens no unix
  socket and writes no temporary files;
- leader election off (`--leader-elect=false`, upstream default true, lease in volcano-system);
  `--scheduler-name=volcano` (upstream's default, said explicitly: the pods the podgroup controller looks at).

Not run: Volcano's webhook-manager (cmd/webhook-manager), so nothing defaults or validates Volcano objects (no
default queue or minAvailable filled into a vcjob, no validation of Queue changes or deletions): create them
complete. It could run out of cluster as the lab's Kueue webhooks do (it takes `--webhook-url`), with a serving
certificate from the lab's PKI and its webhook configurations removed before it stops - not done yet. Nor vc-agent
(node colocation) and the agent scheduler."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from .config import LabConfig
from .errors import LabError
from .k8s import ensure_crd

VERSION_KEY = "VOLCANO_VERSION"
# The CRDs the lab installs (files of config/crd/volcano/bases): what vc-scheduler watches (PodGroups, Queues,
# HyperNodes, Numatopologies), and what the controller-manager's job and queue controllers watch besides (Volcano Jobs;
# Commands, for the QueueCommandSync gate, on by default)
CRDS = (
    "scheduling.volcano.sh_podgroups.yaml",
    "scheduling.volcano.sh_queues.yaml",
    "topology.volcano.sh_hypernodes.yaml",
    "nodeinfo.volcano.sh_numatopologies.yaml",
    "batch.volcano.sh_jobs.yaml",
    "bus.volcano.sh_commands.yaml",
)
# The controller-manager's controllers the lab runs (see the module docstring for the ones left off)
CONTROLLERS = ("queue-controller", "pg-controller", "job-controller", "gc-controller")
SCHEDULER_NAME = "volcano"
CONF_NAME = "volcano-scheduler.conf"


def crd_files(cfg: LabConfig) -> list[Path]:
    files = [cfg.bindir("volcano") / "crd" / name for name in CRDS]
    missing = [p.name for p in files if not p.is_file()]
    if missing:
        where = cfg.bindir("volcano") / "crd"
        raise LabError(f"no Volcano CRD {', '.join(missing)} in {where}: rebuild it (hack/cluster/build.sh volcano)")
    return files


def state_dir(cfg: LabConfig) -> Path:
    """The scheduler's own directory of the state: its configuration (watched as a directory), the klog level
    socket, cache dumps."""
    return cfg.state / "volcano"


def conf_path(cfg: LabConfig) -> Path:
    return state_dir(cfg) / CONF_NAME


def write_conf(cfg: LabConfig) -> Path:
    """Copy the chart's default scheduler configuration (kept beside the binary by the build) into the state."""
    src = cfg.bindir("volcano") / CONF_NAME
    if not src.is_file():
        raise LabError(f"no Volcano scheduler configuration at {src}: rebuild it (hack/cluster/build.sh volcano)")
    state_dir(cfg).mkdir(parents=True, exist_ok=True)
    dst = conf_path(cfg)
    shutil.copyfile(src, dst)
    return dst


def env(cfg: LabConfig) -> dict[str, str]:
    return {"DEBUG_SOCKET_DIR": str(state_dir(cfg))}


def argv(cfg: LabConfig) -> list[str]:
    p = cfg.ports
    return [
        str(cfg.binary("vc-scheduler")),
        f"--kubeconfig={cfg.kubeconfig}",
        f"--scheduler-conf={conf_path(cfg)}",
        f"--scheduler-name={SCHEDULER_NAME}",
        "--leader-elect=false",
        "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{p['volcano-healthz']}",
        "--enable-metrics=true",
        f"--listen-address=127.0.0.1:{p['volcano-metrics']}",
        f"--cache-dump-dir={state_dir(cfg)}",
        "--v=2",
    ]


def controller_manager_argv(cfg: LabConfig) -> list[str]:
    p = cfg.ports
    return [
        str(cfg.binary("vc-controller-manager")),
        f"--kubeconfig={cfg.kubeconfig}",
        "--leader-elect=false",
        f"--scheduler-name={SCHEDULER_NAME}",
        "--controllers=" + ",".join(f"+{c}" for c in CONTROLLERS),
        "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{p['volcano-cm-healthz']}",
        "--enable-metrics=true",
        f"--listen-address=127.0.0.1:{p['volcano-cm-metrics']}",
        "--v=2",
    ]


def default_queue_open(api_client: Any) -> bool:
    """Whether the `default` Queue (made by vc-scheduler at start) is Open: the controller-manager's queue controller
    has synced its caches and works (its /healthz answers before any controller has started)."""
    from kubernetes import client

    try:
        queue = client.CustomObjectsApi(api_client).get_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", "default"
        )
    except client.ApiException:
        return False
    return (queue.get("status") or {}).get("state") == "Open"


def ensure_prereqs(api_client: Any, cfg: LabConfig, timeout: float = 30.0) -> None:
    """Its CRDs (all created first, then each waited on: they get established together) and its configuration,
    before it starts."""
    from kubernetes import client

    files = crd_files(cfg)
    ext = client.ApiextensionsV1Api(api_client)
    for path in files:
        try:
            ext.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        except client.ApiException as exc:
            if exc.status != 409:  # already there
                raise
    for path in files:
        ensure_crd(api_client, path, timeout)
    write_conf(cfg)

"""Volcano in the lab: the real scheduler (volcano.sh/volcano v1.15.1, cmd/scheduler = vc-scheduler, built by
hack/cluster/build.sh against volcano.sh/apis v1.14.0 plus one constant) runs out of cluster against the lab's API
server and schedules pods whose `schedulerName` is `volcano` for real: gang scheduling of PodGroups (minMember),
queues (capability, proportion), enqueue gating; kwok runs the pods it binds, as it runs the default scheduler's.

What it needs (checked against v1.15.1):
- Volcano's CRDs (config/crd/volcano/bases, copied beside the binary at build time: read from the build cache, never
  committed) before it starts: its informers wait for PodGroups, Queues, HyperNodes and Numatopologies (the
  ResourceTopology gate is on by default; NodeShards only with sharding, off). The lab installs those four and
  batch.volcano.sh Jobs (:data:`CRDS`), not the other kinds of the bases (CronJobs, Commands, ColocationConfigurations,
  NodeShards: the controller-manager's and the agent's): each CRD is a large OpenAPI schema the API server
  compiles, and all nine took 4.8 s of `up` against 1.9 s for these five;
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
`root` and `default` (weight 1, default reclaimable) when they are missing. Upstream's controller-manager opens
Queues (status.state Open) - the scheduler allocates only into open ones; the lab does not run the controller-manager,
so the simulator plays that part of it (simulator/handlers/volcano.py). Not run either: Volcano's webhooks, and the
controllers that turn Volcano Jobs (vcjob) into PodGroups and give bare `schedulerName: volcano` pods a PodGroup -
such pods are never scheduled in the lab; create the PodGroup and annotate the pods
(`scheduling.k8s.io/group-name`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from .config import LabConfig
from .errors import LabError
from .k8s import ensure_crd

VERSION_KEY = "VOLCANO_VERSION"
# The CRDs the lab installs (files of config/crd/volcano/bases): what vc-scheduler watches, and Volcano Jobs
CRDS = (
    "scheduling.volcano.sh_podgroups.yaml",
    "scheduling.volcano.sh_queues.yaml",
    "topology.volcano.sh_hypernodes.yaml",
    "nodeinfo.volcano.sh_numatopologies.yaml",
    "batch.volcano.sh_jobs.yaml",
)
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

"""The lab's Volcano wiring without a cluster: the scheduler's ports, argv (every listener on loopback, leader election
off, the chart's configuration from the state), environment and files, where it starts; and the simulator's stand-in
for the controller-manager's queue controller (new Queues are opened)."""

from __future__ import annotations

import pytest
from gpuops_lab import volcano
from gpuops_lab.cluster import BINARIES, ORDER, Lab
from gpuops_lab.config import LabConfig
from gpuops_lab.errors import LabError
from gpuops_lab.simulator.fakeclient import FakeKubeClient
from gpuops_lab.simulator.framework import Simulator
from gpuops_lab.simulator.handlers import BUILTIN_HANDLERS
from gpuops_lab.simulator.handlers.volcano import QUEUE, VolcanoQueueHandler

CHART_CONF = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'


def _cfg(tmp_path, **env):
    return LabConfig.load(
        {
            "GPUOPS_LAB_STATE": str(tmp_path / "lab"),
            "GPUOPS_CACHE": str(tmp_path / "cache"),
            "GPUOPS_LAB_NFD_MASTER_PORT": "30290",
            **env,
        }
    )


def test_ports_follow_nfd_master_after_kueue_and_have_variables(tmp_path):
    cfg = _cfg(tmp_path)
    assert (cfg.ports["volcano-metrics"], cfg.ports["volcano-healthz"]) == (30296, 30297)
    assert cfg.ports["kueue-probe"] == 30295  # the next free offsets after Kueue's +3/+4/+5
    default = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path)}).ports
    assert (default["volcano-metrics"], default["volcano-healthz"]) == (20296, 20297)
    own = _cfg(tmp_path, GPUOPS_LAB_VOLCANO_HEALTHZ_PORT="31000")
    assert own.ports["volcano-healthz"] == 31000 and own.ports["volcano-metrics"] == 30296
    with pytest.raises(LabError, match="GPUOPS_LAB_VOLCANO_METRICS_PORT"):
        _cfg(tmp_path, GPUOPS_LAB_VOLCANO_METRICS_PORT="x")
    ports = list(LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path)}).ports.values())
    assert len(ports) == len(set(ports))


def test_pinned_version_and_binary(tmp_path):
    cfg = _cfg(tmp_path)
    assert cfg.versions["VOLCANO_VERSION"] == "1.15.1" and cfg.versions["VOLCANO_APIS_VERSION"] == "1.14.0"
    assert cfg.binary("vc-scheduler") == tmp_path / "cache" / "bin" / "volcano-v1.15.1" / "vc-scheduler"
    assert "vc-scheduler" in BINARIES


def test_argv_binds_loopback_without_leader_election(tmp_path):
    cfg = _cfg(tmp_path)
    argv = volcano.argv(cfg)
    assert argv[0] == str(cfg.binary("vc-scheduler"))
    for flag in (
        f"--kubeconfig={cfg.kubeconfig}",
        f"--scheduler-conf={cfg.state / 'volcano' / 'volcano-scheduler.conf'}",
        "--scheduler-name=volcano",
        "--leader-elect=false",
        "--enable-healthz=true",
        "--healthz-address=127.0.0.1:30297",
        "--enable-metrics=true",
        "--listen-address=127.0.0.1:30296",
        f"--cache-dump-dir={cfg.state / 'volcano'}",
    ):
        assert flag in argv
    # no listener left on an upstream default (":8080", ":11251": every interface)
    addresses = [a.split("=", 1)[1] for a in argv if a.startswith(("--listen-address", "--healthz-address"))]
    assert len(addresses) == 2 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert not [a for a in argv if "pprof" in a]
    # a half-written configuration (the scheduler reloads on every write) must not be fatal, as in the chart
    assert "--disable-default-scheduler-config" not in argv
    # the klog level socket in the state, not the host-wide /tmp/klog-socks another lab would take over
    assert volcano.env(cfg) == {"DEBUG_SOCKET_DIR": str(cfg.state / "volcano")}


def test_the_lab_starts_probes_and_lists_it(tmp_path):
    cfg = _cfg(tmp_path)
    lab = Lab(cfg, say=lambda _m: None)
    assert ORDER.index("kube-apiserver") < ORDER.index("vc-scheduler") < ORDER.index("simulator")
    assert lab._argv("vc-scheduler") == volcano.argv(cfg)
    assert lab._env("vc-scheduler")["DEBUG_SOCKET_DIR"] == str(cfg.state / "volcano")
    assert lab._ports_of("vc-scheduler") == [("vc-scheduler metrics", 30296), ("vc-scheduler healthz", 30297)]
    _probe, what, _timeout = lab._ready_probe("vc-scheduler")
    assert what == "GET http://127.0.0.1:30297/healthz"


def test_conf_and_crds_come_from_the_build(tmp_path):
    cfg = _cfg(tmp_path)
    with pytest.raises(LabError, match="build.sh volcano"):
        volcano.write_conf(cfg)
    with pytest.raises(LabError, match="build.sh volcano"):
        volcano.crd_files(cfg)
    d = cfg.bindir("volcano")
    (d / "crd").mkdir(parents=True)
    (d / "volcano-scheduler.conf").write_text(CHART_CONF)
    for name in (*volcano.CRDS[:-1], "batch.volcano.sh_cronjobs.yaml"):
        (d / "crd" / name).write_text("kind: CustomResourceDefinition\n")
    with pytest.raises(LabError, match="batch.volcano.sh_jobs.yaml"):
        volcano.crd_files(cfg)
    (d / "crd" / "batch.volcano.sh_jobs.yaml").write_text("kind: CustomResourceDefinition\n")
    path = volcano.write_conf(cfg)
    assert path == volcano.conf_path(cfg) and path.read_text() == CHART_CONF
    assert path.parent != cfg.state  # its own directory: the scheduler watches the configuration's directory
    # what the scheduler's informers wait for, and Volcano Jobs; not the controller-manager's and agent's other kinds
    assert [p.name for p in volcano.crd_files(cfg)] == [
        "scheduling.volcano.sh_podgroups.yaml",
        "scheduling.volcano.sh_queues.yaml",
        "topology.volcano.sh_hypernodes.yaml",
        "nodeinfo.volcano.sh_numatopologies.yaml",
        "batch.volcano.sh_jobs.yaml",
    ]


# ---- the simulator's queue controller stand-in ---------------------------------------------------------------------


class Sim:
    def __init__(self) -> None:
        self.client = FakeKubeClient(cluster_scoped={(QUEUE.api_version, QUEUE.kind)})
        self.sim = Simulator(self.client, [VolcanoQueueHandler()])

    def queue(self, name: str, **spec) -> None:
        self.client.add(
            {
                "apiVersion": QUEUE.api_version,
                "kind": QUEUE.kind,
                "metadata": {"name": name},
                "spec": {"weight": 1, **spec},
            }
        )

    def settle(self) -> None:
        self.sim.sync()
        for _attempt in range(5):
            self.sim.process_pending()

    def get(self, name: str) -> dict:
        return self.client.obj(QUEUE.api_version, QUEUE.kind, name, None)


def test_new_queues_are_opened_and_parented_to_root_as_upstream():
    s = Sim()
    s.queue("root")
    s.queue("default", reclaimable=True)
    s.queue("team-a", capability={"nvidia.com/gpu": "4"})
    s.queue("child", parent="team-a")
    s.settle()
    assert {n: s.get(n)["status"]["state"] for n in ("root", "default", "team-a", "child")} == dict.fromkeys(
        ("root", "default", "team-a", "child"), "Open"
    )
    assert "parent" not in s.get("root")["spec"]
    assert s.get("default")["spec"]["parent"] == "root" and s.get("team-a")["spec"]["parent"] == "root"
    assert s.get("child")["spec"]["parent"] == "team-a"  # a parent it names is kept
    assert s.get("team-a")["spec"]["capability"] == {"nvidia.com/gpu": "4"}
    writes = len(s.client.writes)
    s.settle()
    assert len(s.client.writes) == writes  # nothing more to do


def test_a_queue_with_a_state_is_left_alone():
    s = Sim()
    s.queue("closed", parent="root")
    s.client.patch(QUEUE.api_version, QUEUE.kind, "closed", None, {"status": {"state": "Closed"}}, "merge", "status")
    s.settle()
    assert s.get("closed")["status"]["state"] == "Closed"
    assert not [w for w in s.client.writes if w[0].startswith("patch") and w[3] != {"status": {"state": "Closed"}}]


def test_it_runs_in_the_lab_simulator():
    assert VolcanoQueueHandler in BUILTIN_HANDLERS

"""The lab's Volcano wiring without a cluster: the scheduler's and the controller-manager's ports, argv (every listener
on loopback, leader election off, the chart's configuration from the state, the controllers the lab runs), environment
and files, where they start; and no simulator handler stands in for the controller-manager any more."""

from __future__ import annotations

import pytest
from gpuops_lab import volcano
from gpuops_lab.cluster import BINARIES, ORDER, Lab
from gpuops_lab.config import LabConfig
from gpuops_lab.errors import LabError
from gpuops_lab.simulator.handlers import BUILTIN_HANDLERS

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


def test_controller_manager_ports_follow_nfd_master_and_have_variables(tmp_path):
    cfg = _cfg(tmp_path)
    assert (cfg.ports["volcano-cm-metrics"], cfg.ports["volcano-cm-healthz"]) == (30298, 30299)
    default = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path)}).ports
    assert (default["volcano-cm-metrics"], default["volcano-cm-healthz"]) == (20298, 20299)
    own = _cfg(tmp_path, GPUOPS_LAB_VOLCANO_CM_HEALTHZ_PORT="31001", GPUOPS_LAB_VOLCANO_CM_METRICS_PORT="31002")
    assert (own.ports["volcano-cm-metrics"], own.ports["volcano-cm-healthz"]) == (31002, 31001)
    with pytest.raises(LabError, match="GPUOPS_LAB_VOLCANO_CM_METRICS_PORT"):
        _cfg(tmp_path, GPUOPS_LAB_VOLCANO_CM_METRICS_PORT="x")


def test_pinned_version_and_binary(tmp_path):
    cfg = _cfg(tmp_path)
    assert cfg.versions["VOLCANO_VERSION"] == "1.15.1" and cfg.versions["VOLCANO_APIS_VERSION"] == "1.14.0"
    assert cfg.binary("vc-scheduler") == tmp_path / "cache" / "bin" / "volcano-v1.15.1" / "vc-scheduler"
    assert cfg.binary("vc-controller-manager") == cfg.bindir("volcano") / "vc-controller-manager"
    assert "vc-scheduler" in BINARIES and "vc-controller-manager" in BINARIES


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


def test_controller_manager_argv_binds_loopback_runs_four_controllers(tmp_path):
    cfg = _cfg(tmp_path)
    argv = volcano.controller_manager_argv(cfg)
    assert argv[0] == str(cfg.binary("vc-controller-manager"))
    for flag in (
        f"--kubeconfig={cfg.kubeconfig}",
        "--leader-elect=false",
        "--scheduler-name=volcano",
        "--enable-healthz=true",
        "--healthz-address=127.0.0.1:30299",
        "--enable-metrics=true",
        "--listen-address=127.0.0.1:30298",
    ):
        assert flag in argv
    addresses = [a.split("=", 1)[1] for a in argv if a.startswith(("--listen-address", "--healthz-address"))]
    assert len(addresses) == 2 and all(a.startswith("127.0.0.1:") for a in addresses)
    # only the named controllers: no '*' (upstream's default '*,-sharding-controller' starts the cronjob, jobflow,
    # jobtemplate, hyperNode and colocation controllers, whose kinds the lab does not serve)
    (controllers,) = [a.split("=", 1)[1].split(",") for a in argv if a.startswith("--controllers=")]
    assert controllers == ["+queue-controller", "+pg-controller", "+job-controller", "+gc-controller"]


def test_the_lab_starts_probes_and_lists_it(tmp_path):
    cfg = _cfg(tmp_path)
    lab = Lab(cfg, say=lambda _m: None)
    assert ORDER.index("kube-apiserver") < ORDER.index("vc-scheduler") < ORDER.index("simulator")
    assert lab._argv("vc-scheduler") == volcano.argv(cfg)
    assert lab._env("vc-scheduler")["DEBUG_SOCKET_DIR"] == str(cfg.state / "volcano")
    assert lab._ports_of("vc-scheduler") == [("vc-scheduler metrics", 30296), ("vc-scheduler healthz", 30297)]
    _probe, what, _timeout = lab._ready_probe("vc-scheduler")
    assert what == "GET http://127.0.0.1:30297/healthz"
    # the controller-manager after the scheduler: its probe waits for the default Queue the scheduler makes to be Open
    assert ORDER.index("vc-scheduler") < ORDER.index("vc-controller-manager") < ORDER.index("simulator")
    assert lab._argv("vc-controller-manager") == volcano.controller_manager_argv(cfg)
    assert lab._ports_of("vc-controller-manager") == [
        ("vc-controller-manager metrics", 30298),
        ("vc-controller-manager healthz", 30299),
    ]
    probe, what, _timeout = lab._ready_probe("vc-controller-manager")
    assert what == "GET http://127.0.0.1:30299/healthz, then the default Queue Open"
    with pytest.raises(OSError):  # nothing listens (wait_until takes an exception for "not ready yet")
        probe()


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
    with pytest.raises(LabError, match="bus.volcano.sh_commands.yaml"):
        volcano.crd_files(cfg)
    (d / "crd" / "bus.volcano.sh_commands.yaml").write_text("kind: CustomResourceDefinition\n")
    path = volcano.write_conf(cfg)
    assert path == volcano.conf_path(cfg) and path.read_text() == CHART_CONF
    assert path.parent != cfg.state  # its own directory: the scheduler watches the configuration's directory
    # what the scheduler's informers wait for, and the job and queue controllers' (Volcano Jobs, Commands); not the
    # kinds of the controllers the lab leaves off (CronJobs, ColocationConfigurations) nor NodeShards
    assert [p.name for p in volcano.crd_files(cfg)] == [
        "scheduling.volcano.sh_podgroups.yaml",
        "scheduling.volcano.sh_queues.yaml",
        "topology.volcano.sh_hypernodes.yaml",
        "nodeinfo.volcano.sh_numatopologies.yaml",
        "batch.volcano.sh_jobs.yaml",
        "bus.volcano.sh_commands.yaml",
    ]


def test_no_simulator_handler_plays_the_controller_manager():
    assert not [h for h in BUILTIN_HANDLERS if "volcano" in h.__module__ or "Volcano" in h.__name__]

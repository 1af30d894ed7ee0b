"""The lab's monitoring without a cluster: the simulated dcgm-exporter's text (dcgm-exporter 4.5.3-4.8.2 labels, HELP
and TYPE, XID texts, faults), the fault file, the ServiceMonitor -> scrape job mapping that stands in for the
Prometheus Operator (target labels, jobLabel, namespaceSelector, honorLabels, relabelings, what is skipped), a
Prometheus object's selectors, the rules files, the ports and argv, the simulated GPU Operator's exporter Service
and ServiceMonitor, the pods' GPUs (pod attribution) and the node_exporter's generated sysfs trees."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from gpuops_lab import dcgm, monitoring, node_exporter, profiles
from gpuops_lab.config import LabConfig
from gpuops_lab.errors import LabError
from gpuops_lab.simulator.handlers import nvidia


def _cfg(tmp_path, **env):
    return LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "lab"), "GPUOPS_CACHE": str(tmp_path / "c"), **env})


# ---- the exporter -----------------------------------------------------------------------------------------------
def test_gpus_of_a_profile_are_its_nvidia_gpus_with_stable_ids():
    dgx = dcgm.gpus_of("n1", profiles.load("dgx-h100"))
    assert [g.index for g in dgx] == list(range(8))
    assert dgx[0].pci_bus_id == "00000000:18:00.0" and dgx[0].model == "NVIDIA H100 80GB HBM3"
    assert (
        dgx[0].uuid
        == dcgm.gpus_of("n1", profiles.load("dgx-h100"))[0].uuid
        != dcgm.gpus_of("n2", profiles.load("dgx-h100"))[0].uuid
    )
    assert len({g.uuid for g in dgx}) == 8
    assert len(dcgm.gpus_of("l", profiles.load("pcie-l40s"))) == 4
    assert dcgm.gpus_of("a", profiles.load("amd-mi300x")) == []  # not NVIDIA: no dcgm-exporter series
    assert dcgm.gpus_of("c", profiles.load("cpu-only")) == []


def _render(faults=None, collectors=None):
    gpus = dcgm.gpus_of("dgx-0", profiles.load("dgx-h100"))
    cols = dcgm.parse_collectors(collectors or dcgm.DEFAULT_COLLECTORS)
    return gpus, dcgm.render("dgx-0", gpus, cols, faults or {}, "580.126.20", now=1000.0, started=900.0)


def test_render_is_dcgm_exporters_format():
    gpus, text = _render()
    lines = text.splitlines()
    assert lines[0] == "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz)."
    assert lines[1] == "# TYPE DCGM_FI_DEV_SM_CLOCK gauge"
    g = gpus[0]
    assert lines[2] == (
        f'DCGM_FI_DEV_SM_CLOCK{{gpu="0",UUID="{g.uuid}",pci_bus_id="00000000:18:00.0",device="nvidia0",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="dgx-0",DCGM_FI_DRIVER_VERSION="580.126.20"} 1980'
    )
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in lines
    assert "DCGM_FI_DRIVER_VERSION{" not in text  # a label field, not a series
    xid = [x for x in lines if x.startswith("DCGM_FI_DEV_XID_ERRORS{")]
    assert len(xid) == 8 and all(x.endswith(',err_code="0",err_msg="No Error"} 0') for x in xid)
    util = [x for x in lines if x.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(util) == 8
    # healthy values stay below the alert thresholds' defaults
    for metric, limit in (("GPU_TEMP", 85), ("MEMORY_TEMP", 95), ("POWER_USAGE", 700), ("ROW_REMAP_FAILURE", 1)):
        values = [float(x.rsplit(" ", 1)[1]) for x in lines if x.startswith(f"DCGM_FI_DEV_{metric}{{")]
        assert len(values) == 8 and max(values) < limit, metric
    # fields outside the collectors are not exported (the NVLink error counters are commented out by default)
    assert "NVLINK_CRC" not in text and "CLOCKS_EVENT_REASONS" not in text


def test_faults_change_the_gpus_series():
    faults = {"3": {"xid": 79}, "5": {"gone": True}, "1": {**dcgm.PRESETS["row-remap-failure"]}, "2": {"gpu_temp": 92}}
    gpus, text = _render(faults)
    lines = text.splitlines()
    xid = [x for x in lines if x.startswith("DCGM_FI_DEV_XID_ERRORS{")]
    assert len(xid) == 7  # GPU 5 fell off the bus: no series at all
    assert not any(f'UUID="{gpus[5].uuid}"' in x for x in lines)
    assert [x for x in xid if 'gpu="3"' in x][0].endswith(',err_code="79",err_msg="GPU has fallen off the bus"} 79')
    assert [x for x in xid if 'gpu="1"' in x][0].endswith(
        'err_code="64",err_msg="ECC page retirement or row remapper recording failure"} 64'
    )
    assert [x for x in lines if x.startswith("DCGM_FI_DEV_ROW_REMAP_FAILURE{") and 'gpu="1"' in x][0].endswith(" 1")
    assert [x for x in lines if x.startswith("DCGM_FI_DEV_GPU_TEMP{") and 'gpu="2"' in x][0].endswith(" 92")


def test_growing_counters_and_optional_collectors():
    csv = dcgm.DEFAULT_COLLECTORS + (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, counter, Total number of NVLink flow-control CRC errors.\n"
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, Current clock event reasons\n"
    )
    _gpus, text = _render({"0": {"nvlink_errors_per_second": 2, "pcie_replays_per_second": 3, "since": 990.0}}, csv)
    lines = text.splitlines()
    assert "# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter" in lines
    assert [x for x in lines if x.startswith("DCGM_FI_DEV_NVLINK_CRC_FLIT") and 'gpu="0"' in x][0].endswith(" 20")
    assert [x for x in lines if x.startswith("DCGM_FI_DEV_PCIE_REPLAY_COUNTER{") and 'gpu="0"' in x][0].endswith(" 30")
    assert [x for x in lines if x.startswith("DCGM_FI_DEV_CLOCKS_EVENT_REASONS{") and 'gpu="1"' in x][0].endswith(" 0")


def _gpu_pod(name, node="n1", gpus=(1,), phase="Running", created="2026-01-01T00:00:00Z", ns="ml"):
    return {
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": str(n)}} if n else {}}
                for i, n in enumerate(gpus)
            ],
        },
        "status": {"phase": phase},
    }


def test_assign_gpus_first_fit_in_a_stable_order():
    pods = [
        _gpu_pod("late", gpus=(2,), created="2026-01-01T00:00:09Z"),
        _gpu_pod("early", gpus=(1, 0, 2), created="2026-01-01T00:00:01Z"),  # a container without GPUs holds none
        _gpu_pod("pending", gpus=(1,), phase="Pending"),
        _gpu_pod("elsewhere", node="n2"),
        _gpu_pod("too-big", gpus=(4,), created="2026-01-01T00:00:10Z"),  # 3 GPUs left: the kubelet refuses it
        _gpu_pod("fits", gpus=(3,), created="2026-01-01T00:00:11Z"),
    ]
    got = dcgm.assign_gpus("n1", pods, 8)
    who = {i: (h["pod"], h["container"]) for i, h in got.items()}
    assert who == {
        "0": ("early", "c0"),
        "1": ("early", "c2"),
        "2": ("early", "c2"),
        "3": ("late", "c0"),
        "4": ("late", "c0"),
        "5": ("fits", "c0"),
        "6": ("fits", "c0"),
        "7": ("fits", "c0"),
    }
    assert got["0"] == {"container": "c0", "namespace": "ml", "pod": "early"}
    assert dcgm.assign_gpus("n1", list(reversed(pods)), 8) == got  # the order is the pods', not the list's
    assert dcgm.assign_gpus("n1", [], 8) == {} and dcgm.assign_gpus("n1", pods, 0) == {}


def test_assign_gpus_with_replicas_spreads_then_last_wins():
    # time-slicing, 2 GPUs x 2 replicas: the least-used GPU first; a shared GPU goes to the last pod given it
    pods = [_gpu_pod(f"p{i}", created=f"2026-01-01T00:00:0{i}Z") for i in range(4)]
    got = dcgm.assign_gpus("n1", pods, 2, replicas=2)
    assert {i: h["pod"] for i, h in got.items()} == {"0": "p2", "1": "p3"}
    # a pod asking for 2 replicas gets one on each GPU
    got = dcgm.assign_gpus("n1", [_gpu_pod("two", gpus=(2,))], 2, replicas=4)
    assert set(got) == {"0", "1"}


def test_render_adds_the_holders_attributes_to_every_series_of_its_gpus():
    gpus = dcgm.gpus_of("dgx-0", profiles.load("dgx-h100"))
    cols = dcgm.parse_collectors(dcgm.DEFAULT_COLLECTORS)
    holders = {"2": {"container": "train", "namespace": "ml", "pod": "job-0"}}
    text = dcgm.render("dgx-0", gpus, cols, {}, "580.126.20", now=1000.0, started=900.0, holders=holders)
    lines = [x for x in text.splitlines() if not x.startswith("#")]
    held = [x for x in lines if 'gpu="2"' in x]
    assert len(held) == len(cols) - 1  # every counter (not the label field) of GPU 2
    assert all('container="train",' in x and 'namespace="ml",pod="job-0"}' in x for x in held)
    assert not any("pod=" in x for x in lines if 'gpu="2"' not in x)  # a GPU nobody holds: no attributes
    xid = [x for x in held if x.startswith("DCGM_FI_DEV_XID_ERRORS{")][0]
    # attributes in key order, as dcgm-exporter's template ranges over its Attributes map
    assert xid.endswith(
        'DCGM_FI_DRIVER_VERSION="580.126.20",container="train",err_code="0",err_msg="No Error",namespace="ml",'
        'pod="job-0"} 0'
    )


def test_rdma_devices_and_the_node_exporters_sysfs(tmp_path):
    dgx = node_exporter.rdma_devices(profiles.load("dgx-h100"))
    assert [d["name"] for d in dgx] == [f"mlx5_{i}" for i in range(8)]
    assert {(d["link_layer"], d["hca"]) for d in dgx} == {("InfiniBand", "MT4129")}
    l40s = node_exporter.rdma_devices(profiles.load("pcie-l40s"))
    assert [(d["name"], d["link_layer"]) for d in l40s] == [("mlx5_0", "Ethernet"), ("mlx5_1", "Ethernet")]
    assert node_exporter.rdma_devices(profiles.load("cpu-only")) == []  # an Intel NIC: no mlx5_ib
    root = node_exporter.write_tree(tmp_path / "n1", "n1", dgx, now=1000.0)
    port = root / "class" / "infiniband" / "mlx5_3" / "ports" / "1"
    for f in ("link_layer", "state", "phys_state", "rate"):  # what procfs needs besides fw_ver
        assert (port / f).is_file(), f
    assert (root / "class" / "infiniband" / "mlx5_3" / "fw_ver").is_file()
    assert (port / "counters" / "port_xmit_data").read_text() == "0\n"
    node_exporter.write_tree(tmp_path / "n1", "n1", dgx, now=1010.0)
    words = int((port / "counters" / "port_xmit_data").read_text())
    assert 1e9 * 10 <= words * 4 <= 6e9 * 10  # 1-6 GB/s, in 4-octet words
    # every counter is there after an advance; the error counters (written once) still read 0
    assert sorted(p.name for p in (port / "counters").iterdir()) == sorted(node_exporter.counters("n1", "mlx5_3", 0))
    assert {(port / "counters" / n).read_text() for n in node_exporter.COUNTER_ZERO} == {"0\n"}
    assert not [p.name for p in (port / "counters").iterdir() if p.name.startswith(".")]
    argv = node_exporter.argv(tmp_path / "node_exporter", root, 30000)
    assert "--collector.disable-defaults" in argv and "--collector.infiniband" in argv
    assert f"--path.sysfs={root}" in argv and "--web.listen-address=127.0.0.1:30000" in argv
    assert node_exporter.targets({"n1": 30000}) == [
        {"targets": ["127.0.0.1:30000"], "labels": {"instance": "n1", "node": "n1"}}
    ]


def test_xid_texts_follow_upstream():
    assert dcgm.dcgm_xid.message(79) == "GPU has fallen off the bus"
    assert dcgm.dcgm_xid.message(48) == "Double Bit ECC Error"
    assert dcgm.dcgm_xid.message(999) == "Unknown Error"


def test_inject_and_clear_faults(tmp_path):
    state = tmp_path / "lab"
    dcgm.inject(state, "n1", 3, dcgm.fault_spec(["xid79"]))
    dcgm.inject(state, "n1", 3, dcgm.fault_spec(["gpu_temp=95"]))
    dcgm.inject(state, "n2", None, {dcgm.EXPORTER_DOWN: True})
    got = dcgm.read_faults(state)
    assert got["n1"]["3"]["xid"] == 79 and got["n1"]["3"]["gpu_temp"] == 95 and "since" in got["n1"]["3"]
    assert got["n2"] == {dcgm.EXPORTER_DOWN: True}
    assert dcgm.clear(state, "n1", 3) == {"n2": {dcgm.EXPORTER_DOWN: True}}
    assert dcgm.clear(state) == {}
    assert dcgm.fault_spec(["clocks_event_reasons=0x40", "gone=true"]) == {"clocks_event_reasons": 64, "gone": True}
    for bad in (["xid"], ["nope=1"], ["gpu_temp=hot"]):
        with pytest.raises(LabError):
            dcgm.fault_spec(bad)
    with pytest.raises(LabError):
        dcgm.inject(state, "n1", 0, {"bogus": 1})


# ---- ServiceMonitor -> scrape jobs ------------------------------------------------------------------------------
NS = "gpu-operator"


def _svc(name="nvidia-dcgm-exporter", ns=NS, labels=None, port_name="gpu-metrics"):
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": "nvidia-dcgm-exporter"}},
        "spec": {"ports": [{"name": port_name, "port": 9400, "targetPort": 9400}]},
    }


def _pod(name, node, ns=NS, app="nvidia-dcgm-exporter"):
    return {
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app, "team": "gpu"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "nvidia-dcgm-exporter", "ports": [{"name": "metrics", "containerPort": 9400}]}],
        },
    }


def _eps(pods, name="nvidia-dcgm-exporter", ns=NS):
    addrs = [
        {
            "ip": f"10.244.0.{i + 2}",
            "nodeName": p["spec"]["nodeName"],
            "targetRef": {"kind": "Pod", "name": p["metadata"]["name"], "namespace": ns},
        }
        for i, p in enumerate(pods)
    ]
    return {
        "metadata": {"name": name, "namespace": ns},
        "subsets": [{"addresses": addrs, "ports": [{"name": "gpu-metrics", "port": 9400}]}],
    }


def _sm(ns=NS, **spec):
    base = {
        "endpoints": [{"port": "gpu-metrics", "path": "/metrics"}],
        "jobLabel": "app",
        "namespaceSelector": {"matchNames": [ns]},
        "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
    }
    return {"metadata": {"name": "nvidia-dcgm-exporter", "namespace": ns}, "spec": {**base, **spec}}


def _address(pod, path):
    if pod["metadata"]["labels"].get("app") != "nvidia-dcgm-exporter":
        return None
    return "127.0.0.1:9999", f"/node/{pod['spec']['nodeName']}{path}"


def test_servicemonitor_targets_carry_the_operators_labels():
    pods = [_pod("dcgm-a", "n1"), _pod("dcgm-b", "n2")]
    jobs, skipped = monitoring.scrape_jobs([_sm()], [_svc()], [_eps(pods)], pods, [NS, "default"], _address)
    assert skipped == []
    (job,) = jobs
    assert job.name == "serviceMonitor/gpu-operator/nvidia-dcgm-exporter/0"
    assert job.config == {"job_name": job.name, "honor_labels": False, "honor_timestamps": True}
    assert [t["targets"] for t in job.targets] == [["127.0.0.1:9999"], ["127.0.0.1:9999"]]
    labels = {k: v for k, v in job.targets[0]["labels"].items() if not k.startswith("__meta")}
    assert labels == {
        "__metrics_path__": "/node/n1/metrics",
        "job": "nvidia-dcgm-exporter",  # jobLabel: app -> the Service's app label
        "namespace": NS,
        "service": "nvidia-dcgm-exporter",
        "pod": "dcgm-a",
        "container": "nvidia-dcgm-exporter",
        "endpoint": "gpu-metrics",
        "instance": "10.244.0.2:9400",
    }
    assert job.targets[0]["labels"]["__meta_kubernetes_pod_node_name"] == "n1"
    assert job.targets[0]["labels"]["__meta_kubernetes_pod_label_team"] == "gpu"


def test_servicemonitor_options_and_selection():
    pods = [_pod("dcgm-a", "n1"), _pod("other", "n1", app="something")]
    sm = _sm(
        jobLabel="missing",
        targetLabels=["app"],
        podTargetLabels=["team"],
        namespaceSelector={"any": True},
        endpoints=[
            {
                "port": "gpu-metrics",
                "interval": "15s",
                "honorLabels": True,
                "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}],
                "metricRelabelings": [{"action": "drop", "regex": "DCGM_FI_PROF_.*", "sourceLabels": ["__name__"]}],
            },
            {"port": "not-on-the-service"},
        ],
    )
    svcs = [_svc(), _svc("elsewhere", ns="other"), _svc("unlabelled", labels={"app": "x"})]
    eps = [_eps(pods), _eps([], "elsewhere", "other")]
    jobs, skipped = monitoring.scrape_jobs([sm], svcs, eps, pods, [NS, "other"], _address)
    first, second = jobs
    assert first.config["honor_labels"] is True and first.config["scrape_interval"] == "15s"
    assert first.config["relabel_configs"] == [
        {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node"}
    ]
    assert first.config["metric_relabel_configs"][0]["action"] == "drop"
    (target,) = first.targets
    assert target["labels"]["job"] == "nvidia-dcgm-exporter"  # no such label on the Service: its name
    assert (target["labels"]["app"], target["labels"]["team"]) == ("nvidia-dcgm-exporter", "gpu")
    assert second.targets == []
    job, where = "serviceMonitor/gpu-operator/nvidia-dcgm-exporter/0", "gpu-operator/nvidia-dcgm-exporter"
    assert skipped == [f"{job}: {where} 10.244.0.3:9400 (no simulated exporter)"]


def test_namespace_selection():
    assert monitoring.namespaces_of(_sm(namespaceSelector={}), ["a", NS]) == [NS]
    assert monitoring.namespaces_of(_sm(namespaceSelector={"matchNames": ["a", "gone"]}), ["a", NS]) == ["a"]
    assert monitoring.namespaces_of(_sm(namespaceSelector={"any": True}), ["a", NS]) == ["a", NS]


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        ({}, {}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
    ],
)
def test_label_selectors(selector, labels, want):
    assert monitoring.selector_matches(selector, labels) is want


def test_a_prometheus_objects_selectors_are_read_as_the_operator_reads_them():
    objs = [
        {"metadata": {"name": "a", "namespace": "mon", "labels": {"release": "kps"}}},
        {"metadata": {"name": "b", "namespace": "team", "labels": {"release": "kps"}}},
        {"metadata": {"name": "c", "namespace": "mon", "labels": {}}},
    ]
    ns_labels = {"mon": {}, "team": {"watch": "yes"}}
    prom = {
        "metadata": {"name": "p", "namespace": "mon"},
        "spec": {"serviceMonitorSelector": {"matchLabels": {"release": "kps"}}},
    }

    def names(p, ns_key="serviceMonitorNamespaceSelector"):
        return [
            o["metadata"]["name"]
            for o in monitoring.select_for_prometheus(objs, p, "serviceMonitorSelector", ns_key, ns_labels)
        ]

    assert names(None) == ["a", "b", "c"]  # no Prometheus object: all
    assert names(prom) == ["a"]  # nil namespace selector: its own namespace
    prom["spec"]["serviceMonitorNamespaceSelector"] = {}
    assert names(prom) == ["a", "b"]  # {}: every namespace
    prom["spec"]["serviceMonitorNamespaceSelector"] = {"matchLabels": {"watch": "yes"}}
    assert names(prom) == ["b"]
    assert names({"metadata": {"name": "p", "namespace": "mon"}, "spec": {}}) == []  # nil selector: none


def test_rules_files_and_prometheus_config(tmp_path):
    rules = monitoring.rule_files(
        [{"metadata": {"name": "gpu", "namespace": "mon"}, "spec": {"groups": [{"name": "g", "rules": []}]}}]
    )
    assert rules == {"mon-gpu.yaml": {"groups": [{"name": "g", "rules": []}]}}
    cfg = _cfg(tmp_path)
    job = monitoring.Job("serviceMonitor/a/b/0", {"job_name": "serviceMonitor/a/b/0", "honor_labels": False})
    changed = monitoring.write_config(cfg, [job], rules)
    assert changed
    d = monitoring.mon_dir(cfg)
    import yaml

    conf = yaml.safe_load((d / "prometheus.yml").read_text())
    assert conf["global"] == {"scrape_interval": "5s", "evaluation_interval": "5s", "scrape_timeout": "4s"}
    assert [j["job_name"] for j in conf["scrape_configs"]] == [
        "prometheus",
        "kube-state-metrics",
        "node-exporter",
        "serviceMonitor/a/b/0",
    ]
    assert conf["scrape_configs"][2]["file_sd_configs"][0]["files"] == [str(d / "node-exporter-targets.json")]
    assert conf["scrape_configs"][3]["file_sd_configs"][0]["files"] == [str(d / "sd" / "serviceMonitor_a_b_0.json")]
    assert (d / "rules" / "mon-gpu.yaml").is_file()
    am = f"127.0.0.1:{monitoring.port(cfg, 'alertmanager')}"
    assert conf["alerting"] == {"alertmanagers": [{"api_version": "v2", "static_configs": [{"targets": [am]}]}]}
    route = yaml.safe_load((d / "alertmanager.yml").read_text())
    assert route["route"]["receiver"] == "null"
    assert route["route"]["routes"] == [{"receiver": "gpuops-remediation", "matchers": ['alertname=~"GPU.+"']}]
    assert route["receivers"][1]["webhook_configs"] == [{"url": monitoring.eda_webhook_url(cfg), "send_resolved": True}]
    assert monitoring.write_config(cfg, [job], rules) is False  # unchanged: no reload
    assert monitoring.write_config(cfg, [job], {}) is True  # a rules file went away
    assert not (d / "rules" / "mon-gpu.yaml").exists()


def test_alertmanager_config_passes_amtool(tmp_path):
    """The lab Alertmanager's configuration, checked by the real amtool 0.35.0 (hack/cluster/build.sh alertmanager),
    and its route: a GPU alert goes to the rulebook's webhook, any other alert to the null receiver."""
    import subprocess

    amtool = monitoring.binary(LabConfig.load(), "alertmanager").parent / "amtool"
    assert amtool.is_file(), f"amtool not found at {amtool}: run hack/cluster/build.sh alertmanager"
    conf = tmp_path / "alertmanager.yml"
    conf.write_text(yaml.safe_dump(monitoring.alertmanager_config("http://127.0.0.1:5050/alerts")))
    check = subprocess.run([str(amtool), "check-config", str(conf)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr

    def receiver(*labels: str) -> str:
        argv = [str(amtool), "config", "routes", "test", f"--config.file={conf}", *labels]
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout.strip()

    assert receiver("alertname=GPUXidFallenOffBus", "Hostname=dgx-0", "UUID=GPU-1") == "gpuops-remediation"
    assert receiver("alertname=KubeNodeNotReady", "node=dgx-0") == "null"


def test_ports_follow_nfd_master_and_argv_stay_on_loopback(tmp_path):
    cfg = _cfg(tmp_path, GPUOPS_LAB_NFD_MASTER_PORT="28290")
    assert [monitoring.port(cfg, n) for n in monitoring.PORTS] == [28310, 28311, 28312, 28313, 28314, 28315]
    default = _cfg(tmp_path)
    assert monitoring.prometheus_url(default) == "http://127.0.0.1:20310"
    prom = monitoring._argv(cfg, "prometheus")
    assert "--web.listen-address=127.0.0.1:28310" in prom and "--web.enable-lifecycle" in prom
    assert any(a.startswith("--storage.tsdb.retention.time=") for a in prom)
    ksm = monitoring._argv(cfg, "kube-state-metrics")
    assert "--resources=nodes,pods" in ksm and "--host=127.0.0.1" in ksm and "--telemetry-host=127.0.0.1" in ksm
    assert ksm[0].endswith(f"kube-state-metrics-v{cfg.versions['KUBE_STATE_METRICS_VERSION']}/kube-state-metrics")
    am = monitoring._argv(cfg, "alertmanager")
    assert am[0].endswith(f"alertmanager-v{cfg.versions['ALERTMANAGER_VERSION']}/alertmanager")
    assert "--web.listen-address=127.0.0.1:28314" in am and "--cluster.listen-address=" in am
    assert monitoring.eda_webhook_url(cfg) == "http://127.0.0.1:28315/alerts"


def test_bad_monitoring_port_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_LAB_PROMETHEUS_PORT", "nine")
    with pytest.raises(LabError, match="GPUOPS_LAB_PROMETHEUS_PORT"):
        monitoring.port(_cfg(tmp_path), "prometheus")


# ---- the simulated GPU Operator's exporter Service and ServiceMonitor --------------------------------------------
def test_simulated_operator_renders_the_exporters_service_and_servicemonitor():
    cp = {
        "spec": {
            "dcgmExporter": {
                "serviceMonitor": {
                    "enabled": True,
                    "interval": "15s",
                    "honorLabels": False,
                    "additionalLabels": {"release": "kps"},
                }
            }
        }
    }
    svc = nvidia.dcgm_exporter_service(cp, NS)
    assert svc["metadata"]["labels"] == {"app": "nvidia-dcgm-exporter"}
    assert svc["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    assert svc["spec"]["ports"] == [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400, "protocol": "TCP"}]
    sm = nvidia.dcgm_exporter_service_monitor(cp, NS)
    assert sm["metadata"]["labels"] == {"app": "nvidia-dcgm-exporter", "release": "kps"}
    assert sm["spec"] == {
        "endpoints": [{"port": "gpu-metrics", "path": "/metrics", "interval": "15s", "honorLabels": False}],
        "jobLabel": "app",
        "namespaceSelector": {"matchNames": [NS]},
        "selector": {"matchLabels": {"app": "nvidia-dcgm-exporter"}},
    }
    assert nvidia.dcgm_exporter_service_monitor({"spec": {}}, NS) is None
    ds = nvidia.daemonset_manifest(nvidia.OPERAND_BY_KEY["dcgm-exporter"], {"spec": {}}, NS, nvidia.DEFAULT_INSTANCE)
    container = ds["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9400}]


def test_monitoring_ports_in_the_ephemeral_range_are_refused(tmp_path, monkeypatch):
    rng = tmp_path / "ip_local_port_range"
    rng.write_text("20310 20310\n", encoding="utf-8")
    monkeypatch.setenv("GPUOPS_LAB_EPHEMERAL_RANGE_FILE", str(rng))
    monkeypatch.delenv("GPUOPS_LAB_PROMETHEUS_PORT", raising=False)
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path), "GPUOPS_LAB_EPHEMERAL_RANGE_FILE": str(rng)})
    assert monitoring.port(cfg, "kube-state-metrics") == 20312
    with pytest.raises(LabError, match=r"GPUOPS_LAB_PROMETHEUS_PORT=20310 \(prometheus\): inside"):
        monitoring.port(cfg, "prometheus")


def test_the_roles_doca_telemetry_service_is_scraped_at_the_lab_exporter():
    # the role's own objects (through the collection link of `make venv`), so the lab is held to what the role applies
    sys.path.insert(0, str(Path(__file__).resolve().parents[4] / ".state/collections"))
    from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _scrape_objects  # noqa: PLC0415

    net = "nvidia-network-operator"
    svc, sm = _scrape_objects.telemetry_objects("monitoring", {"release": "kps"}, net, 9189)
    # upstream's DTS pod: host network (pod IP = node IP), no declared container port
    pods = [
        {
            "metadata": {"name": f"doca-telemetry-service-{n}", "namespace": net, "labels": {DTS: "doca-telemetry"}},
            "spec": {"nodeName": n, "hostNetwork": True, "containers": [{"name": "doca-telemetry-service"}]},
        }
        for n in ("dgx-0", "dgx-1")
    ]
    eps = _eps(pods, name="gpuops-doca-telemetry", ns=net)
    eps["subsets"][0]["ports"] = [{"name": "telemetry", "port": 9189}]

    def address(pod, path):
        return monitoring.lab_address(pod, path, "127.0.0.1:9999", {"dgx-0", "dgx-1"}, set())

    jobs, skipped = monitoring.scrape_jobs([sm], [svc], [eps], pods, [net, "monitoring"], address)
    assert skipped == []
    (job,) = jobs
    assert job.name == "serviceMonitor/monitoring/gpuops-doca-telemetry/0"
    first = job.targets[0]["labels"]
    assert first["job"] == "gpuops-doca-telemetry" and first["endpoint"] == "telemetry"
    assert first["instance"] == "10.244.0.2:9189" and first["__metrics_path__"] == "/dts/dgx-0/metrics"
    assert job.config["relabel_configs"][0]["target_label"] == "node"  # the health check counts targets per node
    # a dcgm-exporter pod on a node the exporter does not serve is not a DTS target
    assert monitoring.lab_address(_pod("dcgm-a", "dgx-0"), "/metrics", "x", {"dgx-0"}, set()) is None
    assert monitoring.lab_address(pods[0], "/metrics", "x", set(), set()) is None  # a node the lab does not know


DTS = "app.kubernetes.io/name"

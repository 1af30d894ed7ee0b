from __future__ import annotations

import pytest
from gpuops_lab import nodes
from gpuops_lab.config import LabConfig
from gpuops_lab.errors import LabError


def test_ports_from_env(tmp_path):
    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path), "GPUOPS_LAB_APISERVER_PORT": "17443"})
    assert cfg.apiserver_url == "https://127.0.0.1:17443"
    assert cfg.kubeconfig == tmp_path / "kubeconfig"


@pytest.mark.parametrize("bad", ["http", "0", "70000", "-1"])
def test_bad_port_is_a_clear_error(bad):
    with pytest.raises(LabError, match="GPUOPS_LAB_APISERVER_PORT"):
        LabConfig.load({"GPUOPS_LAB_APISERVER_PORT": bad})


def test_versions_are_pinned():
    v = LabConfig.load({}).versions
    assert v["K8S_VERSION"].startswith("1.34.")
    assert v["ETCD_VERSION"].startswith("3.6.")
    assert set(v) >= {"KWOK_VERSION", "HELM_VERSION"}


def test_local_inventory_describes_the_demo_cluster():
    hosts = nodes.inventory_nodes()
    assert sorted(hosts.values()) == ["cpu-only", "dgx-h100", "dgx-h100", "pcie-l40s"]


def test_table_format():
    rows = [{"NODE": "a", "READY": "True"}, {"NODE": "long-name", "READY": "False"}]
    out = nodes.table(rows).splitlines()
    assert out[0].split() == ["NODE", "READY"] and out[2].split() == ["long-name", "False"]
    assert nodes.table([]) == "(no nodes)"


def test_table_rows_show_gpu_and_rdma_resources():
    """The demo's table: GPU resources and the RDMA shared device plugin's rdma/* allocatable per node."""
    from types import SimpleNamespace as NS

    def node(name, alloc):
        meta = NS(name=name, labels={}, annotations={})
        return NS(metadata=meta, status=NS(allocatable=alloc, conditions=[NS(type="Ready", status="True")]))

    items = [
        node("dgx-0", {"cpu": "224", "nvidia.com/gpu": "8", "rdma/rdma_ib": "63", "rdma/rdma_roce": "63"}),
        node("cpu-0", {"cpu": "8"}),
    ]
    core = NS(list_node=lambda: NS(items=items))
    rs = nodes.rows(core)
    assert [r["RDMA RESOURCES"] for r in rs] == ["rdma/rdma_ib=63,rdma/rdma_roce=63", "-"]
    assert [r["GPU RESOURCES"] for r in rs] == ["nvidia.com/gpu=8", "-"]
    assert "RDMA RESOURCES" in nodes.table(rs).splitlines()[0]


def test_nfd_master_is_pinned_configured_and_on_loopback(tmp_path):
    from gpuops_lab import nfd
    from gpuops_lab.cluster import BINARIES, ORDER, Lab

    cfg = LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path), "GPUOPS_LAB_NFD_MASTER_PORT": "21290"})
    assert cfg.versions["NFD_VERSION"] == "0.19.0"
    assert cfg.binary("nfd-master") == cfg.cache / "bin" / "nfd-v0.19.0" / "nfd-master"
    assert "nfd-master" in BINARIES
    # after the API server (it needs the CRDs and its node), before the simulator publishes NodeFeatures
    assert ORDER.index("kube-apiserver") < ORDER.index("nfd-master") < ORDER.index("simulator")
    lab = Lab(cfg, say=lambda m: None)
    argv = lab._argv("nfd-master")
    assert argv[0] == str(cfg.binary("nfd-master"))
    assert f"-kubeconfig={cfg.kubeconfig}" in argv and "-port=21290" in argv
    env = lab._env("nfd-master")
    assert env["NODE_NAME"] == nfd.CONTROL_PLANE_NODE and env["KUBERNETES_NAMESPACE"] == nfd.NAMESPACE
    assert lab._ports_of("nfd-master") == [("nfd-master metrics", 21290)]


@pytest.mark.parametrize(
    ("range_text", "env", "rejected"),
    [
        ("32768\t60999\n", {"GPUOPS_LAB_ETCD_PEER_PORT": "32800"}, "GPUOPS_LAB_ETCD_PEER_PORT=32800"),
        ("32768\t60999\n", {"GPUOPS_LAB_APISERVER_PORT": "60999"}, "GPUOPS_LAB_APISERVER_PORT=60999"),
        ("10000 20000\n", {}, "GPUOPS_LAB_APISERVER_PORT=16443"),
        # a follower port (nfd-master + 3) inside the range is named too
        ("30003 30003\n", {"GPUOPS_LAB_NFD_MASTER_PORT": "30000"}, "GPUOPS_LAB_KUEUE_WEBHOOK_PORT=30003"),
        ("32768\t60999\n", {"GPUOPS_LAB_APISERVER_PORT": "32767"}, None),
        ("32768\t60999\n", {"GPUOPS_LAB_APISERVER_PORT": "61000"}, None),
        ("garbage", {"GPUOPS_LAB_ETCD_PEER_PORT": "32800"}, "32768-60999"),  # unreadable: Linux's default range
    ],
)
def test_ports_in_the_ephemeral_range_are_refused(tmp_path, range_text, env, rejected):
    rng = tmp_path / "ip_local_port_range"
    rng.write_text(range_text, encoding="utf-8")
    env = {"GPUOPS_LAB_STATE": str(tmp_path), "GPUOPS_LAB_EPHEMERAL_RANGE_FILE": str(rng), **env}
    if rejected is None:
        assert LabConfig.load(env).ports
        return
    with pytest.raises(LabError, match="ephemeral port range") as err:
        LabConfig.load(env)
    assert rejected in str(err.value)


def test_make_test_labs_use_ports_outside_the_ephemeral_range():
    """Every lab hack/run-tests.sh starts (lab_env a|b|c|d) keeps all its ports below Linux's default range."""
    import re
    from pathlib import Path

    script = (Path(__file__).resolve().parents[4] / "hack" / "run-tests.sh").read_text(encoding="utf-8")
    bases = [int(b) for b in re.findall(r"[a-z]\) base=(\d+) ;;", script)]
    assert len(bases) == 4
    exports = dict(re.findall(r"(GPUOPS_LAB_\w+_PORT)=\$\(\((\d+) \+ base\)\)", script))
    assert "GPUOPS_LAB_ETCD_PEER_PORT" in exports
    for base in bases:
        env = {var: str(int(port) + base) for var, port in exports.items()}
        env["GPUOPS_LAB_EPHEMERAL_RANGE_FILE"] = "/nonexistent"  # Linux's default range, whatever this host has
        assert max(LabConfig.load(env).ports.values()) < 32768, base

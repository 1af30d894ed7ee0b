"""The real node_exporter in the lab's monitoring, for the RDMA dashboard panels: one process per simulated node
with RDMA devices, on loopback, with only its infiniband collector (``--collector.disable-defaults
--collector.infiniband``) reading a sysfs tree generated from the node's hardware profile (``--path.sysfs``).

Which nodes: every Node with a hardware profile (label ``gpuops.io/hardware-profile``) that has Mellanox/NVIDIA
(``15b3``) NICs and loads ``mlx5_ib`` (dgx-h100: 8 ConnectX-7 InfiniBand ports; pcie-l40s: 2 ConnectX-6 Dx RoCE
ports), at most MAX_PROCESSES of them (by name; the rest are reported as skipped).

The tree (``<lab state>/monitoring/node-exporter/<node>/sys``) has what prometheus/procfs v0.19.0
(sysfs/class_infiniband.go) reads: ``class/infiniband/mlx5_<n>/{fw_ver,board_id,hca_type,node_guid}`` and
``ports/1/{link_layer,state,phys_state,rate}`` written by the same writer the host simulation uses
(hostsim/sysfs.add_ibdev, the device directory under ``devices/``), plus ``ports/1/counters/`` (``port_xmit_data``,
``port_rcv_data`` in 4-octet words as the kernel reports them, ``port_xmit_packets``, ``port_rcv_packets``, and the
error counters at 0). The counters advance with time at a steady per-port rate (a few GB/s, stable per node and
port) from the moment the tree is first written, and are rewritten on every monitoring sync (every few seconds),
so ``rate()`` over them has data.

Prometheus scrapes them with the static job ``node-exporter`` (file_sd: ``node-exporter-targets.json``), target
labels ``instance=<node>`` and ``node=<node>`` (kube-prometheus-stack relabels node-exporter's instance to the node
name the same way).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .config import LabConfig
from .procs import Proc

MELLANOX = "15b3"
MAX_PROCESSES = 32
JOB = "node-exporter"
TARGETS_FILE = "node-exporter-targets.json"
PORTS_FILE = "node-exporters.json"
COUNTER_ZERO = (
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "symbol_error",
)


def _modules(profile: Mapping[str, Any]) -> set[str]:
    out = set()
    for m in (profile.get("host") or {}).get("modules_loaded") or ():
        out.add(m["name"] if isinstance(m, dict) else str(m))
    return out


def rdma_devices(profile: Mapping[str, Any]) -> list[dict[str, str]]:
    """The RDMA devices (one port each) of a node of this hardware profile: [{name, link_layer, hca, model, addr}],
    named mlx5_0, mlx5_1, ... in the profile's order, as mlx5_ib names them. None without mlx5_ib loaded."""
    if "mlx5_ib" not in _modules(profile):
        return []
    from .hostsim import catalog

    out: list[dict[str, str]] = []
    for dev in (profile.get("host") or {}).get("pci") or ():
        if dev.get("role") != "nic" or str(dev.get("vendor")) != MELLANOX:
            continue
        hca = (catalog.DEVICES.get((MELLANOX, str(dev.get("device")))) or {}).get("hca") or "MT4129"
        for _index in range(int(dev.get("count") or 1)):
            i = len(out)
            out.append(
                {
                    "name": f"mlx5_{i}",
                    "link_layer": str(dev.get("link_layer") or "Ethernet"),
                    "hca": str(hca),
                    "model": str(dev.get("model") or ""),
                    "addr": f"0000:{0x20 + 0x10 * i:02x}:00.0",
                }
            )
    return out


def _rate(node: str, dev: str, direction: str) -> int:
    """Bytes per second of one port's direction: 1-6 GB/s, stable per node and port."""
    h = int(hashlib.sha1(f"{node}/{dev}/{direction}".encode()).hexdigest()[:8], 16)  # noqa: S324 - not security
    return 1_000_000_000 + h % 5_000_000_000


def counters(node: str, dev: str, elapsed: float) -> dict[str, int]:
    """The counter files of one port after `elapsed` seconds: data in 4-octet words (the kernel's unit; procfs
    multiplies by 4), packets of 4 KiB, errors 0."""
    tx = int(_rate(node, dev, "tx") * max(0.0, elapsed))
    rx = int(_rate(node, dev, "rx") * max(0.0, elapsed))
    out = {"port_xmit_data": tx // 4, "port_rcv_data": rx // 4, "port_xmit_packets": tx // 4096}
    out["port_rcv_packets"] = rx // 4096
    out.update(dict.fromkeys(COUNTER_ZERO, 0))
    return out


def tree_dir(cfg: LabConfig, node: str) -> Path:
    from . import dcgm

    return dcgm.state_dir(cfg.state) / "node-exporter" / node


def write_tree(tree: Path, node: str, devices: list[dict[str, str]], now: float | None = None) -> Path:
    """Write (first time) or advance (later) the sysfs tree of `node` under `tree`; returns the sysfs root."""
    from .hostsim import sysfs
    from .hostsim.hostfs import Host

    now = time.time() if now is None else now
    host = Host(tree)
    stamp = tree / "started"
    try:
        started = float(stamp.read_text())
    except (FileNotFoundError, ValueError):
        started = now
        tree.mkdir(parents=True, exist_ok=True)
        stamp.write_text(f"{started}\n")
    for dev in devices:
        dev_dir = host.p(f"/sys/devices/pci0000:00/{dev['addr']}")
        port = dev_dir / "infiniband" / dev["name"] / "ports" / "1"
        if not (port / "rate").is_file():
            dev_dir.mkdir(parents=True, exist_ok=True)
            host.p(sysfs.CLASS_IB).mkdir(parents=True, exist_ok=True)
            sysfs.add_ibdev(
                host, dev_dir, dev["name"], link_layer=dev["link_layer"], hca=dev["hca"], seed=f"{node}/{dev['addr']}"
            )
        (port / "counters").mkdir(exist_ok=True)
        for name, value in counters(node, dev["name"], now - started).items():
            target = port / "counters" / name
            if value == 0 and target.is_file():
                continue  # counters only grow: a file there already holds 0 (most of them: the error counters)
            tmp = port / f".{name}.tmp"  # beside counters/, not in it: the collector lists counters/
            tmp.write_text(f"{value}\n")
            tmp.replace(target)
    return host.p("/sys")


def argv(binary: Path, sysfs_root: Path, port: int) -> list[str]:
    return [
        str(binary),
        "--collector.disable-defaults",
        "--collector.infiniband",
        f"--path.sysfs={sysfs_root}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc(cfg: LabConfig, node: str) -> Proc:
    return Proc(f"node-exporter-{node}", cfg.run, cfg.logs)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # monitoring-sync and a test's sync() may run at once
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def targets(ports: Mapping[str, int]) -> list[dict[str, Any]]:
    return [{"targets": [f"127.0.0.1:{ports[n]}"], "labels": {"instance": n, "node": n}} for n in sorted(ports)]


def reconcile(cfg: LabConfig, binary: Path, wanted: Mapping[str, list[dict[str, str]]]) -> tuple[list[str], list[str]]:
    """Advance the trees of the `wanted` nodes (node -> rdma_devices), start a node_exporter for each that has none,
    stop those of nodes no longer wanted, and write the target file. Returns (nodes served, skipped)."""
    from . import dcgm

    d = dcgm.state_dir(cfg.state)
    names = sorted(n for n, devs in wanted.items() if devs)
    keep, skipped = names[:MAX_PROCESSES], [f"{JOB}: {n} (over {MAX_PROCESSES} nodes)" for n in names[MAX_PROCESSES:]]
    with _locked(d / ".node-exporters.lock"):
        try:
            ports: dict[str, int] = json.loads((d / PORTS_FILE).read_text())
        except (FileNotFoundError, ValueError):
            ports = {}
        for node in sorted(set(ports) - set(keep)):
            proc(cfg, node).stop()
            ports.pop(node)
            import shutil

            shutil.rmtree(tree_dir(cfg, node), ignore_errors=True)
        for node in keep:
            root = write_tree(tree_dir(cfg, node), node, wanted[node])
            p = proc(cfg, node)
            if node in ports and p.alive():
                continue
            if not binary.is_file():
                skipped.append(f"{JOB}: {node} ({binary} not built: hack/cluster/build.sh node-exporter)")
                continue
            ports[node] = _free_port()
            p.start(argv(binary, root, ports[node]))
        (d / PORTS_FILE).write_text(json.dumps(ports, indent=1, sort_keys=True) + "\n")
        text = json.dumps(targets(ports), indent=1, sort_keys=True) + "\n"
        try:
            same = (d / TARGETS_FILE).read_text() == text
        except FileNotFoundError:
            same = False
        if not same:
            tmp = d / f".{TARGETS_FILE}.tmp"
            tmp.write_text(text)
            tmp.replace(d / TARGETS_FILE)
    return sorted(ports), skipped


def stop_all(cfg: LabConfig) -> list[str]:
    """Stop every node_exporter the lab started (by their PID files)."""
    stopped = []
    for pidfile in sorted(cfg.run.glob("node-exporter-*.pid")):
        name = pidfile.name[: -len(".pid")]
        if Proc(name, cfg.run, cfg.logs).stop():
            stopped.append(name)
    from . import dcgm

    (dcgm.state_dir(cfg.state) / PORTS_FILE).unlink(missing_ok=True)
    return stopped

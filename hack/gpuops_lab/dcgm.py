"""The lab's dcgm-exporter: GPU hardware simulated as data, served in dcgm-exporter 4.x's text format.

One process on loopback plays the exporter of every simulated GPU node: ``GET /node/<node>/metrics`` answers what
the dcgm-exporter pod on that node would (one series set per GPU of the node's hardware profile), so Prometheus has
one target per node (monitoring.py points each ServiceMonitor target there). ``GET /dts/<node>/metrics`` stands for
the Network Operator's DOCA Telemetry Service on that node: a valid exposition with no series (DTS's metric names are
not verified), so its scrape is ``up`` and nothing is invented. It is a separate lab process, not part
of the operator simulator: Prometheus scrapes it every few seconds, and a scrape must neither wait for nor delay the
simulator's reconciles; it needs no API server either (the benchmark serves synthetic nodes that no kube Node
backs).

Format (dcgm-exporter 4.5.3-4.8.2, internal/pkg/rendermetrics/render_metrics.go): per counter ``# HELP`` and
``# TYPE`` from the collectors CSV, then one line per GPU with the labels ``gpu, UUID, pci_bus_id, device,
modelName, Hostname``, then the CSV's ``label`` fields (``DCGM_FI_DRIVER_VERSION``) and, on
``DCGM_FI_DEV_XID_ERRORS``, ``err_code`` and ``err_msg`` (gpu_collector.go), maps rendered in key order as Go
templates do. The collectors are the GPU Operator's default (``dcp-metrics-included.csv``) unless monitoring sync
found the ClusterPolicy's ``dcgmExporter.config`` ConfigMap (key ``dcgm-metrics.csv``), as the operator mounts it.

Pod attribution (dcgm-exporter's PodMapper, internal/pkg/transformation/kubernetes.go, with the GPU Operator's
defaults: Kubernetes mapping on, virtual GPUs off): the kubelet's PodResources API says which devices each container
holds, and every series of a GPU a container holds gets the attributes ``pod``, ``namespace``, ``container`` (all
counters, not only some); a GPU nobody holds keeps its series without them. The kubelet and the device plugin are
simulated as data here (assign_gpus): monitoring sync takes the Running pods bound to the node whose containers ask
for ``nvidia.com/gpu`` and hands out GPU indices by the rule documented on assign_gpus.

State (in ``<lab state>/monitoring``): ``exporter-nodes.json`` (node -> hardware profile, driver version, the GPUs'
holders; written by monitoring sync or the benchmark), ``dcgm-faults.json`` (the injected faults, read again
whenever it changes), ``collectors.csv``. Faults: inject()/clear() here, or ``python -m gpuops_lab dcgm-fault``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from . import dcgm_xid, profiles
from .errors import LabError

NODES_FILE = "exporter-nodes.json"
FAULTS_FILE = "dcgm-faults.json"
COLLECTORS_FILE = "collectors.csv"
NVIDIA_VENDOR = "10de"

# dcgm-exporter 4.5.3-4.8.2 etc/dcp-metrics-included.csv (the GPU Operator's DCGM_EXPORTER_COLLECTORS), its enabled
# lines; Apache-2.0, NVIDIA Corporation.
DEFAULT_COLLECTORS = """\
DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).
DCGM_FI_DEV_GPU_TEMP,    gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE,              gauge, Power draw (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).
DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.
DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_ENC_UTIL,      gauge, Encoder utilization (in %).
DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).
DCGM_FI_DEV_XID_ERRORS,            gauge,   Value of the last XID error encountered.
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL,            counter, Total number of NVLink bandwidth counters for all lanes.
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS,   counter, Number of remapped rows for correctable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE,           gauge,   Whether remapping of rows has failed
DCGM_FI_DRIVER_VERSION,        label, Driver Version
DCGM_FI_PROF_GR_ENGINE_ACTIVE,   gauge, Ratio of time the graphics engine is active.
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.
DCGM_FI_PROF_DRAM_ACTIVE,        gauge, Ratio of cycles the device memory interface is active sending or receiving data.
DCGM_FI_PROF_PCIE_TX_BYTES,      gauge, The rate of data transmitted over the PCIe bus - including both protocol \
headers and data payloads - in bytes per second.
DCGM_FI_PROF_PCIE_RX_BYTES,      gauge, The rate of data received over the PCIe bus - including both protocol \
headers and data payloads - in bytes per second.
"""

# Per model: (board power W, max SM clock MHz, memory clock MHz). Public data-sheet figures; others get the fallback.
MODELS = {
    "NVIDIA H100 80GB HBM3": (700.0, 1980, 2619),
    "NVIDIA H200": (700.0, 1980, 3201),
    "NVIDIA L40S": (350.0, 2520, 9001),
}
FALLBACK_MODEL = (400.0, 1500, 1500)
# PCI bus numbers of the GPUs, in nvidia-smi order (a DGX H100's), then counted on
BUS_NUMBERS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")

# Fault keys (per GPU) and what they do to the GPU's series; presets name common combinations.
FAULT_KEYS = {
    "xid": "last XID (DCGM_FI_DEV_XID_ERRORS, err_code/err_msg); stays until cleared, as the real gauge does",
    "gone": "the GPU fell off the bus: no series at all for it",
    "gpu_temp": "GPU temperature (C)",
    "memory_temp": "memory temperature (C)",
    "power_usage": "power draw (W)",
    "gpu_util": "utilisation (%)",
    "clocks_event_reasons": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS bit mask (when that counter is collected)",
    "uncorrectable_remapped_rows": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS (counter)",
    "ecc_dbe_vol_total": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (counter, when collected)",
    "row_remap_failure": "DCGM_FI_DEV_ROW_REMAP_FAILURE (0/1)",
    "nvlink_errors_per_second": "each NVLink error counter grows by this many per second (when collected)",
    "pcie_replays_per_second": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER grows by this many per second",
}
PRESETS: dict[str, dict[str, Any]] = {
    "xid79": {"xid": 79},
    "fallen-off-bus": {"gone": True},
    "ecc": {"xid": 94, "uncorrectable_remapped_rows": 1, "ecc_dbe_vol_total": 1},
    "row-remap-failure": {"xid": 64, "uncorrectable_remapped_rows": 1, "row_remap_failure": 1},
    "thermal": {"gpu_temp": 92, "memory_temp": 99, "clocks_event_reasons": 0x40},
    "power-brake": {"power_usage": 720, "clocks_event_reasons": 0x80},
    "nvlink": {"nvlink_errors_per_second": 20},
    "pcie-replay": {"pcie_replays_per_second": 20},
}
# A node-level fault: the exporter on that node answers 503 (up == 0 for its target)
EXPORTER_DOWN = "exporter_down"


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    pci_bus_id: str
    model: str
    memory_mib: int


def gpus_of(node: str, profile: Mapping[str, Any]) -> list[Gpu]:
    """The NVIDIA GPUs of a node of this hardware profile, with a UUID stable per node name and index."""
    out: list[Gpu] = []
    for dev in profiles.accelerators(profile):
        if str(dev.get("vendor")) != NVIDIA_VENDOR:
            continue
        for _index in range(int(dev.get("count") or 1)):
            i = len(out)
            bus = BUS_NUMBERS[i] if i < len(BUS_NUMBERS) else f"{0xE0 + i:02X}"
            gid = uuid.uuid5(uuid.NAMESPACE_URL, f"gpuops-lab/{node}/gpu/{i}")
            out.append(Gpu(i, f"GPU-{gid}", f"00000000:{bus}:00.0", str(dev["model"]), int(dev.get("memory_mib") or 0)))
    return out


GPU_RESOURCE = "nvidia.com/gpu"


def gpu_request(container: Mapping[str, Any]) -> int:
    """The nvidia.com/gpu units a container asks for (limits, else requests); 0 when none or not a number."""
    res = container.get("resources") or {}
    raw = (res.get("limits") or {}).get(GPU_RESOURCE, (res.get("requests") or {}).get(GPU_RESOURCE, 0))
    try:
        return max(0, int(str(raw)))
    except ValueError:
        return 0


def assign_gpus(
    node: str, pods: list[Mapping[str, Any]], gpu_count: int, replicas: int = 1
) -> dict[str, dict[str, str]]:
    """Which container holds each GPU of `node`: GPU index (a string) -> {pod, namespace, container}, what the
    kubelet's PodResources API would tell dcgm-exporter. The rule (the lab's stand-in for the kubelet and the NVIDIA
    device plugin):

    - the pods: bound to `node` (spec.nodeName), phase Running, in a stable order (creationTimestamp, namespace,
      name); their containers (not init containers) in spec order, each asking for ``nvidia.com/gpu`` (limits,
      else requests) units;
    - each GPU offers `replicas` units (1; more with time-slicing/MPS: the node's allocatable ``nvidia.com/gpu`` over
      its GPU count); each unit goes to the GPU with a free unit that has handed out the fewest so far, the lowest
      index first: without sharing the lowest free indices (first fit), with replicas spread over the GPUs as the
      device plugin's distributed allocation of replicas does;
    - a pod asking for more units than are free gets none (the kubelet would refuse it: UnexpectedAdmissionError);
    - a GPU several containers share (replicas) is attributed to the last of them in that order: dcgm-exporter keys
      its device -> pod map by GPU UUID (replica IDs ``<UUID>::<n>`` cut to the UUID), so the last write wins and
      the GPU keeps one series set. dcgm-exporter's virtual-GPU mode (one series per pod, label ``vgpu``) and MIG
      devices (``nvidia.com/mig-*``) are not simulated.
    """
    used = [0] * gpu_count
    out: dict[str, dict[str, str]] = {}
    running = [
        p
        for p in pods
        if (p.get("spec") or {}).get("nodeName") == node and (p.get("status") or {}).get("phase") == "Running"
    ]
    running.sort(
        key=lambda p: (
            str(p["metadata"].get("creationTimestamp") or ""),
            p["metadata"].get("namespace", ""),
            p["metadata"].get("name", ""),
        )
    )
    for pod in running:
        wants = [(c.get("name", ""), gpu_request(c)) for c in (pod.get("spec") or {}).get("containers") or ()]
        wants = [(name, n) for name, n in wants if n]
        if not wants or sum(n for _container, n in wants) > gpu_count * replicas - sum(used):
            continue
        for cname, n in wants:
            for _unit in range(n):
                free = [i for i in range(gpu_count) if used[i] < replicas]
                i = min(free, key=lambda j: (used[j], j))
                used[i] += 1
                out[str(i)] = {
                    "container": cname,
                    "namespace": pod["metadata"].get("namespace", ""),
                    "pod": pod["metadata"].get("name", ""),
                }
    return out


def parse_collectors(text: str) -> list[tuple[str, str, str]]:
    """(field, prometheus type, help) of each non-comment line of a dcgm-exporter collectors CSV."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3 and parts[0]:
            out.append((parts[0], parts[1], parts[2]))
    return out


def _seed(node: str, gpu: int) -> int:
    return int(hashlib.sha1(f"{node}/{gpu}".encode()).hexdigest()[:8], 16)  # noqa: S324 - not security


def gpu_values(node: str, gpu: Gpu, fault: Mapping[str, Any], now: float, started: float) -> dict[str, float]:
    """The value of every field this exporter simulates for one healthy GPU, with the fault's overrides."""
    seed = _seed(node, gpu.index)
    board, sm_clock, mem_clock = MODELS.get(gpu.model, FALLBACK_MODEL)
    util = float(fault.get("gpu_util", 20 + (seed + int(now // 30)) % 60))  # 20-79 %, changes every 30 s
    power = float(fault.get("power_usage", round(board * (0.15 + 0.5 * util / 100), 3)))
    temp = float(fault.get("gpu_temp", 35 + seed % 10 + util // 5))  # 35-59 C
    reserved = max(1, gpu.memory_mib // 150) if gpu.memory_mib else 0
    used = int((gpu.memory_mib - reserved) * (0.2 + 0.6 * util / 100)) if gpu.memory_mib else 0
    since = float(fault.get("since", now))
    uptime = max(0.0, now - started)
    nvl = float(fault.get("nvlink_errors_per_second", 0)) * max(0.0, now - since)
    return {
        "DCGM_FI_DEV_SM_CLOCK": float(sm_clock),
        "DCGM_FI_DEV_MEM_CLOCK": float(mem_clock),
        "DCGM_FI_DEV_MEMORY_TEMP": float(fault.get("memory_temp", temp + 6)),
        "DCGM_FI_DEV_GPU_TEMP": temp,
        "DCGM_FI_DEV_POWER_USAGE": power,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": float(int(1e9 + seed % 1000 * 1e6 + power * 1000 * uptime)),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": float(
            int(float(fault.get("pcie_replays_per_second", 0)) * max(0.0, now - since))
        ),
        "DCGM_FI_DEV_GPU_UTIL": util,
        "DCGM_FI_DEV_MEM_COPY_UTIL": float(int(util * 0.4)),
        "DCGM_FI_DEV_ENC_UTIL": 0.0,
        "DCGM_FI_DEV_DEC_UTIL": 0.0,
        "DCGM_FI_DEV_XID_ERRORS": float(int(fault.get("xid", 0))),
        "DCGM_FI_DEV_FB_FREE": float(gpu.memory_mib - reserved - used),
        "DCGM_FI_DEV_FB_USED": float(used),
        "DCGM_FI_DEV_FB_RESERVED": float(reserved),
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": float(int(seed % 10000 * 1e6 + util * 4.5e8 * uptime)),
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": float(int(fault.get("uncorrectable_remapped_rows", 0))),
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": float(seed % 3),
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": float(int(fault.get("row_remap_failure", 0))),
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0.0,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": float(int(fault.get("ecc_dbe_vol_total", 0))),
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": float(int(nvl)),
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": float(int(nvl)),
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": float(int(nvl)),
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": float(int(nvl)),
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": float(int(fault.get("clocks_event_reasons", 0))),
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": float(int(fault.get("clocks_event_reasons", 0))),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(util / 100, 6),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(util / 250, 6),
        "DCGM_FI_PROF_DRAM_ACTIVE": round(util / 180, 6),
        "DCGM_FI_PROF_PCIE_TX_BYTES": float(int(util * 2.1e7)),
        "DCGM_FI_PROF_PCIE_RX_BYTES": float(int(util * 3.3e7)),
    }


def _fmt(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(
    node: str,
    gpus: list[Gpu],
    collectors: list[tuple[str, str, str]],
    faults: Mapping[str, Mapping[str, Any]],
    driver_version: str = "",
    now: float | None = None,
    started: float = 0.0,
    holders: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The text dcgm-exporter serves on `node`; `faults` is GPU index (a string) -> fault (FAULT_KEYS), `holders`
    GPU index -> {pod, namespace, container} (assign_gpus). Fields this exporter does not simulate are left out, as
    dcgm-exporter leaves out fields with no value. Attributes (the holder's, err_code/err_msg) follow the labels,
    in key order, as dcgm-exporter's template renders its Attributes map."""
    now = time.time() if now is None else now
    extra = {f: "" for f, t, _help in collectors if t == "label"}
    if "DCGM_FI_DRIVER_VERSION" in extra:
        extra["DCGM_FI_DRIVER_VERSION"] = driver_version
    extra_s = "".join(f',{k}="{_esc(v)}"' for k, v in sorted(extra.items()))
    live = []
    for g in gpus:
        fault = faults.get(str(g.index)) or {}
        if fault.get("gone"):
            continue
        base = (
            f'gpu="{g.index}",UUID="{g.uuid}",pci_bus_id="{g.pci_bus_id}",device="nvidia{g.index}",'
            f'modelName="{_esc(g.model)}",Hostname="{_esc(node)}"{extra_s}'
        )
        held = (holders or {}).get(str(g.index)) or {}
        attrs = {k: str(held[k]) for k in ("container", "namespace", "pod") if k in held}
        live.append((base, attrs, gpu_values(node, g, fault, now, started)))
    out: list[str] = []
    for field, ptype, help_ in collectors:
        if ptype == "label" or not live or field not in live[0][2]:
            continue
        out.append(f"# HELP {field} {help_}\n# TYPE {field} {ptype}\n")
        for base, attrs, values in live:
            v = values[field]
            a = dict(attrs)
            if field == "DCGM_FI_DEV_XID_ERRORS":
                code = int(v)
                a.update(err_code=str(code), err_msg=dcgm_xid.message(code))
            a_s = "".join(f',{k}="{_esc(a[k])}"' for k in sorted(a))
            out.append(f"{field}{{{base}{a_s}}} {_fmt(v)}\n")
    return "".join(out)


# ---- state files: nodes, faults, collectors ----------------------------------------------------------------------
def state_dir(lab_state: Path) -> Path:
    return lab_state / "monitoring"


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)  # atomic: the exporter never reads half a file


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def write_nodes(lab_state: Path, nodes: Mapping[str, Mapping[str, Any]]) -> bool:
    """Set the nodes the exporter serves: name -> {profile, driver_version, holders (optional: assign_gpus)}.
    Returns whether anything changed."""
    path = state_dir(lab_state) / NODES_FILE
    if _read_json(path) == dict(nodes):
        return False
    _write_json(path, dict(nodes))
    return True


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` atomically (a reader never sees half a file) unless the file already holds it; whether it
    wrote. The lab's monitoring files (exporter state, Prometheus configuration, targets, rules) all go through it."""
    try:
        if path.read_text() == text:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
    return True


def write_collectors(lab_state: Path, csv_text: str | None) -> bool:
    text = csv_text if csv_text is not None else DEFAULT_COLLECTORS
    return write_if_changed(state_dir(lab_state) / COLLECTORS_FILE, text)


def read_faults(lab_state: Path) -> dict[str, Any]:
    return _read_json(state_dir(lab_state) / FAULTS_FILE)


def fault_spec(words: list[str]) -> dict[str, Any]:
    """A fault from presets and key=value words (FAULT_KEYS; numbers parsed, gone=true)."""
    out: dict[str, Any] = {}
    for w in words:
        if w in PRESETS:
            out.update(PRESETS[w])
            continue
        key, sep, raw = w.partition("=")
        if not sep or key not in FAULT_KEYS:
            raise LabError(
                f"unknown fault {w!r}: use a preset ({', '.join(PRESETS)}) or KEY=VALUE with KEY one of "
                f"{', '.join(FAULT_KEYS)}"
            )
        if raw.lower() in ("true", "false"):
            out[key] = raw.lower() == "true"
        else:
            try:
                out[key] = int(raw, 0)
            except ValueError:
                try:
                    out[key] = float(raw)
                except ValueError:
                    raise LabError(f"fault {key}={raw!r}: not a number or true/false") from None
    return out


def inject(lab_state: Path, node: str, gpu: int | None, fault: Mapping[str, Any]) -> dict[str, Any]:
    """Add `fault` (FAULT_KEYS; merged into what the GPU already has) to GPU `gpu` of `node`; gpu None: the node's
    exporter itself (``{"exporter_down": true}``). Seen by the next scrape. Returns every fault in force."""
    for key in fault:
        if gpu is not None and key not in FAULT_KEYS:
            raise LabError(f"unknown GPU fault key {key!r}; known: {', '.join(FAULT_KEYS)}")
        if gpu is None and key != EXPORTER_DOWN:
            raise LabError(f"a node-level fault is {{{EXPORTER_DOWN!r}: true}}, got {key!r}")
    faults = read_faults(lab_state)
    slot = faults.setdefault(node, {})
    if gpu is None:
        slot.update(fault)
    else:
        merged = {**slot.get(str(gpu), {}), **fault}
        merged.setdefault("since", time.time())  # counters that grow, grow from here
        slot[str(gpu)] = merged
    _write_json(state_dir(lab_state) / FAULTS_FILE, faults)
    return faults


def clear(lab_state: Path, node: str | None = None, gpu: int | None = None) -> dict[str, Any]:
    """Clear the faults of one GPU, one node, or (no node) all. Returns what remains."""
    faults = read_faults(lab_state)
    if node is None:
        faults = {}
    elif gpu is None:
        faults.pop(node, None)
    else:
        (faults.get(node) or {}).pop(str(gpu), None)
        if not faults.get(node):
            faults.pop(node, None)
    _write_json(state_dir(lab_state) / FAULTS_FILE, faults)
    return faults


# ---- the server -------------------------------------------------------------------------------------------------
class _Files:
    """The state files, read again when their mtime changes; profiles loaded once."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._lock = threading.Lock()
        self._mtimes: dict[str, float] = {}
        self.nodes: dict[str, Any] = {}
        self.faults: dict[str, Any] = {}
        self.collectors = parse_collectors(DEFAULT_COLLECTORS)
        self._gpus: dict[str, list[Gpu]] = {}
        self._profiles: dict[str, Any] = {}

    def _changed(self, name: str) -> bool:
        try:
            m = (self.dir / name).stat().st_mtime_ns
        except FileNotFoundError:
            m = -1
        if self._mtimes.get(name) == m:
            return False
        self._mtimes[name] = m
        return True

    def refresh(self) -> None:
        with self._lock:
            if self._changed(NODES_FILE):
                self.nodes = _read_json(self.dir / NODES_FILE)
                self._gpus = {}
            if self._changed(FAULTS_FILE):
                self.faults = _read_json(self.dir / FAULTS_FILE)
            if self._changed(COLLECTORS_FILE):
                try:
                    self.collectors = parse_collectors((self.dir / COLLECTORS_FILE).read_text())
                except FileNotFoundError:
                    self.collectors = parse_collectors(DEFAULT_COLLECTORS)

    def gpus(self, node: str) -> list[Gpu] | None:
        info = self.nodes.get(node)
        if info is None:
            return None
        if node not in self._gpus:
            name = info.get("profile") or ""
            if name not in self._profiles:
                self._profiles[name] = profiles.load(name)
            self._gpus[node] = gpus_of(node, self._profiles[name])
        return self._gpus[node]


_PATH_RE = re.compile(r"^/node/([^/]+)/metrics$")
_DTS_PATH_RE = re.compile(r"^/dts/([^/]+)/metrics$")
# what the lab's DOCA Telemetry Service answers: no series (its metric names are not verified), a valid exposition
DTS_BODY = "# simulated DOCA Telemetry Service (gpuops lab): no NIC counters are served\n"


def serve(port: int, directory: Path, host: str = "127.0.0.1") -> None:
    files = _Files(directory)
    started = time.time()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms wait for a delayed ACK

        def log_message(self, *args: Any) -> None:  # quiet: Prometheus scrapes every few seconds
            pass

        def _send(self, code: int, body: str, ctype: str = "text/plain; version=0.0.4; charset=utf-8") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._send(200, "ok")
                return
            files.refresh()
            if path == "/nodes":
                self._send(200, json.dumps(sorted(files.nodes)), "application/json")
                return
            if _DTS_PATH_RE.match(path):  # monitoring sync points only the DTS pods' targets here
                self._send(200, DTS_BODY)
                return
            m = _PATH_RE.match(path)
            gpus = files.gpus(m.group(1)) if m else None
            if m is None or gpus is None:
                self._send(404, f"no simulated dcgm-exporter at {path}\n")
                return
            node = m.group(1)
            node_faults = files.faults.get(node) or {}
            if node_faults.get(EXPORTER_DOWN):
                self._send(503, "exporter down (injected fault)\n")
                return
            driver = str(files.nodes[node].get("driver_version") or "")
            holders = files.nodes[node].get("holders") or {}
            self._send(200, render(node, gpus, files.collectors, node_faults, driver, started=started, holders=holders))

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    print(f"dcgm-exporter simulation serving http://{host}:{port}/node/<node>/metrics from {directory}", flush=True)
    server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpuops_lab.dcgm", description="serve the simulated dcgm-exporters")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--state", type=Path, required=True, help="the monitoring state directory")
    args = ap.parse_args(argv)
    serve(args.port, args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())

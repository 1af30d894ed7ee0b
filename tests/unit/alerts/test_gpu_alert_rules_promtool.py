"""The GPU alert rules run by the real promtool (Prometheus 3.5.0, built by hack/cluster/build.sh): `promtool check
rules` on the rules file that rule_groups() writes, and `promtool test rules` with, for every alert, a case where its
fault series fire it (labels and annotations as expected) and healthy cases where it stays silent.

Input series are what dcgm-exporter 4.5.3-4.8.2 exposes (labels from internal/pkg/rendermetrics/render_metrics.go:
gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION; err_code/err_msg on XID series; pod,
namespace, container for a GPU a pod holds), scraped the way the GPU Operator's ServiceMonitor does (job
nvidia-dcgm-exporter, target labels container/endpoint/instance/namespace/pod/service, honorLabels false, so a
workload's labels arrive as exported_*), and kube-state-metrics' kube_node_status_allocatable.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts as ga

NODE = "dgx-h100-0"
MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "580.126.20"
EXPORTER_POD = "nvidia-dcgm-exporter-7x2kq"
INSTANCE = "10.244.3.17:9400"
BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")  # a DGX H100's GPUs

# Rules files under test: the defaults, the clock-event mode, and tuned thresholds (power per model).
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "clock_events": {"throttle_source": "clock_events"},
    "tuned": {"power_watts_by_model": {"NVIDIA L40S": 350}, "gpu_temp_celsius": 80, "idle_util_percent": 10},
}


def _promtool() -> str:
    from gpuops_lab.config import LabConfig

    path = LabConfig.load().binary("promtool")
    assert path.exists(), f"promtool not found at {path}: run hack/cluster/build.sh prometheus"
    return str(path)


# --- series as dcgm-exporter and kube-state-metrics expose them ---------------------------------------------------


def target(instance: str = INSTANCE, pod: str = EXPORTER_POD) -> dict[str, str]:
    """The target labels the Prometheus Operator adds for the GPU Operator's ServiceMonitor."""
    return {
        "container": "nvidia-dcgm-exporter",
        "endpoint": "gpu-metrics",
        "instance": instance,
        "job": "nvidia-dcgm-exporter",
        "namespace": "gpu-operator",
        "pod": pod,
        "service": "nvidia-dcgm-exporter",
    }


def uuid(i: int, node: str = NODE) -> str:
    return f"GPU-{sum(map(ord, node)):08x}-7d4b-4e8a-9c6f-{i:012x}"


def gpu(i: int, node: str = NODE, model: str = MODEL, scrape: dict[str, str] | None = None, **extra: str) -> dict:
    """The labels dcgm-exporter puts on GPU i's series, plus the scrape's target labels."""
    return {
        "gpu": str(i),
        "UUID": uuid(i, node),
        "pci_bus_id": f"00000000:{BUS_IDS[i]}:00.0",
        "device": f"nvidia{i}",
        "modelName": model,
        "Hostname": node,
        "DCGM_FI_DRIVER_VERSION": DRIVER,
        **(target() if scrape is None else scrape),
        **extra,
    }


def alert_gpu(i: int, node: str = NODE, model: str = MODEL, **extra: str) -> dict:
    """The labels a per-GPU alert carries: the GPU's identity, not the scrape target's."""
    return {
        "Hostname": node,
        "UUID": uuid(i, node),
        "gpu": str(i),
        "pci_bus_id": f"00000000:{BUS_IDS[i]}:00.0",
        "modelName": model,
        **extra,
    }


def series(metric: str, labels: dict[str, str], values: str) -> dict:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{metric}{{{body}}}", "values": values}


def xid(i: int, code: int, values: str, **kw: Any) -> dict:
    msg = {0: "No Error", 13: "Graphics Engine Exception", 31: "GPU memory page fault", 48: "Double Bit ECC Error",
           74: "NVLINK Error", 79: "GPU has fallen off the bus", 119: "GSP RPC Timeout"}[code]  # fmt: skip
    return series("DCGM_FI_DEV_XID_ERRORS", gpu(i, err_code=str(code), err_msg=msg, **kw), values)


def up(values: str, instance: str = INSTANCE, pod: str = EXPORTER_POD) -> dict:
    return series("up", target(instance, pod), values)


def allocatable(node: str, gpus: int, values_count: int = 30) -> dict:
    labels = {
        "node": node,
        "resource": "nvidia_com_gpu",
        "unit": "integer",
        "container": "kube-state-metrics",
        "endpoint": "http",
        "instance": "10.244.0.12:8080",
        "job": "kube-state-metrics",
        "namespace": "monitoring",
        "pod": "kube-state-metrics-6d9f8b7c5-x2x9z",
        "service": "kube-state-metrics",
    }
    return series("kube_node_status_allocatable", labels, f"{gpus}x{values_count}")


# --- expected annotations ---------------------------------------------------------------------------------------

_TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def render(text: str, labels: dict[str, str], value: str) -> str:
    """The few template forms the rules use, rendered as Prometheus does. A label the alert does not carry fails the
    test (Prometheus would print an empty value or <no value>), except as an alternative of ``or``."""

    def one(m: re.Match) -> str:
        expr = m.group(1)
        if expr in ("$value", "$value | humanize"):
            return value
        if expr.startswith("$labels."):
            name = expr[len("$labels.") :]
            assert name in labels, f"the template names label {name}, which the alert does not carry"
            return labels[name]
        if expr.startswith("or "):
            names = [n[len("$labels.") :] for n in expr.split()[1:]]
            return next((labels[n] for n in names if labels.get(n)), "")
        raise AssertionError(f"template form not covered by the test: {expr}")

    return _TEMPLATE.sub(one, text)


def rule_of(mode: str, alert: str) -> dict:
    return next(r for g in ga.rule_groups(MODES[mode]) for r in g["rules"] if r["alert"] == alert)


def expect(mode: str, alert: str, labels: dict[str, str], value: str, summary: str) -> dict:
    rule = rule_of(mode, alert)
    full = {**labels, **rule["labels"]}
    ann = rule["annotations"]
    assert render(ann["summary"], full, value) == summary  # the summary read as a person reads it
    return {
        "exp_labels": full,
        "exp_annotations": {
            "summary": summary,
            "description": render(ann["description"], full, value),
            "runbook": ann["runbook"],
        },
    }


def case(name: str, input_series: list[dict], evals: list[tuple[str, str, list[dict]]]) -> dict:
    return {
        "name": name,
        "interval": "1m",
        "input_series": input_series,
        "alert_rule_test": [{"eval_time": t, "alertname": a, "exp_alerts": exp} for t, a, exp in evals],
    }


HEALTHY_TEMP = [series("DCGM_FI_DEV_GPU_TEMP", gpu(i), "45x60") for i in range(2)]


# --- the cases: (mode, alert) -> test groups with at least one firing and one silent evaluation ---------------------


def _xid_cases(alert: str, code: int, healthy_code: int, what: str) -> list[dict]:
    msg = xid(0, code, "")["series"].split('err_msg="')[1].split('"')[0]
    fired = expect(
        "default",
        alert,
        alert_gpu(0, err_code=str(code), err_msg=msg),
        str(code),
        f"GPU 0 on {NODE}: XID {code} ({what})",
    )
    return [
        case(
            f"{alert}: XID {code} on GPU 0 fires while the exporter shows it",
            [xid(0, code, f"{code}x30"), xid(1, 0, "0x30")],
            [("10m", alert, [fired]), ("30m", alert, [fired])],
        ),
        case(
            f"{alert}: XID {healthy_code} ({'no error' if not healthy_code else 'another class'}) stays silent",
            [xid(0, healthy_code, f"{healthy_code}x30"), xid(1, 0, "0x30")],
            [("10m", alert, [])],
        ),
    ]


def _cases() -> dict[tuple[str, str], list[dict]]:
    c: dict[tuple[str, str], list[dict]] = {}
    c["default", "GPUXidMemoryError"] = _xid_cases("GPUXidMemoryError", 48, 13, "memory/ECC")
    c["default", "GPUXidNVLinkError"] = _xid_cases("GPUXidNVLinkError", 74, 0, "NVLink")
    c["default", "GPUXidFallenOffBus"] = _xid_cases("GPUXidFallenOffBus", 79, 0, "fallen off the bus")
    c["default", "GPUXidHardwareError"] = _xid_cases("GPUXidHardwareError", 119, 31, "GPU firmware/hardware")

    app = "GPUXidApplicationError"
    fired = expect(
        "default",
        app,
        alert_gpu(0, err_code="13", err_msg="Graphics Engine Exception"),
        "13",
        f"GPU 0 on {NODE}: application XID 13",
    )
    c["default", app] = [
        case(
            f"{app}: XID 13 appears at 21m, fires for the window, then resolves though the exporter still shows it",
            [xid(0, 0, "0x20 stale"), xid(0, 13, "_x21 13x100"), xid(1, 0, "0x120")],
            [("10m", app, []), ("30m", app, [fired]), ("1h15m", app, [fired]), ("1h30m", app, [])],
        ),
        case(
            f"{app}: an XID 13 shown since before the window (sticky gauge) and a hardware XID stay silent",
            [xid(0, 13, "13x150"), xid(1, 48, "48x150")],
            [("2h", app, [])],
        ),
    ]

    ecc = "GPUUncorrectableECCError"
    ecc_fired = expect("default", ecc, alert_gpu(1), "1", f"GPU 1 on {NODE}: uncorrectable memory error")
    c["default", ecc] = [
        case(
            f"{ecc}: a row remapped for an uncorrectable error on GPU 1",
            [
                series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", gpu(0), "0x60"),
                series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", gpu(1), "0x10 1x50"),
            ],
            [("5m", ecc, []), ("20m", ecc, [ecc_fired])],
        ),
        case(
            f"{ecc}: a double-bit ECC error on GPU 1 (the optional DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter)",
            [
                series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu(0), "0x60"),
                series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu(1), "0x10 2x50"),
            ],
            [("20m", ecc, [ecc_fired])],
        ),
        case(
            f"{ecc}: rows remapped long ago (a constant count) stay silent",
            [series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", gpu(i), "2x90") for i in range(2)],
            [("80m", ecc, [])],
        ),
    ]

    remap = "GPURowRemapFailure"
    c["default", remap] = [
        case(
            f"{remap}: GPU 0 reports a failed remap",
            [
                series("DCGM_FI_DEV_ROW_REMAP_FAILURE", gpu(0), "1x20"),
                series("DCGM_FI_DEV_ROW_REMAP_FAILURE", gpu(1), "0x20"),
            ],
            [
                (
                    "10m",
                    remap,
                    [expect("default", remap, alert_gpu(0), "1", f"GPU 0 on {NODE}: memory row remapping failed")],
                )
            ],
        ),
        case(
            f"{remap}: no failure",
            [series("DCGM_FI_DEV_ROW_REMAP_FAILURE", gpu(i), "0x20") for i in range(2)],
            [("10m", remap, [])],
        ),
    ]

    bus = "GPUFallenOffBus"
    new_instance, new_pod = "10.244.3.41:9400", "nvidia-dcgm-exporter-q9d4m"
    c["default", bus] = [
        case(
            f"{bus}: GPU 1's series stop at 20m while the exporter stays up",
            [
                series("DCGM_FI_DEV_GPU_TEMP", gpu(0), "45x60"),
                series("DCGM_FI_DEV_GPU_TEMP", gpu(1), "45x20 stale"),
                up("1x60"),
            ],
            [
                ("24m", bus, []),
                ("40m", bus, [expect("default", bus, alert_gpu(1), "45", f"GPU 1 on {NODE} stopped reporting")]),
            ],
        ),
        case(
            f"{bus}: every GPU reporting",
            [*HEALTHY_TEMP, up("1x60")],
            [("40m", bus, [])],
        ),
        case(
            f"{bus}: the exporter is down (its alert says so), GPUs' series gone with it",
            [*(series("DCGM_FI_DEV_GPU_TEMP", gpu(i), "45x20 stale") for i in range(2)), up("1x20 0x40")],
            [("40m", bus, [])],
        ),
        case(
            f"{bus}: the exporter pod is replaced (new instance), every GPU reports through the new one",
            [
                *(series("DCGM_FI_DEV_GPU_TEMP", gpu(i), "45x20 stale") for i in range(2)),
                *(
                    series("DCGM_FI_DEV_GPU_TEMP", gpu(i, scrape=target(new_instance, new_pod)), "_x22 45x40")
                    for i in range(2)
                ),
                up("1x20 stale"),
                up("_x22 1x40", new_instance, new_pod),
            ],
            [("40m", bus, [])],
        ),
    ]

    thermal = "GPUThermalThrottling"
    c["default", thermal] = [
        case(
            f"{thermal}: GPU 0 at 88 °C and GPU 1's memory at 96 °C for 20 minutes",
            [
                series("DCGM_FI_DEV_GPU_TEMP", gpu(0), "88x30"),
                series("DCGM_FI_DEV_MEMORY_TEMP", gpu(0), "70x30"),
                series("DCGM_FI_DEV_GPU_TEMP", gpu(1), "60x30"),
                series("DCGM_FI_DEV_MEMORY_TEMP", gpu(1), "96x30"),
            ],
            [
                ("5m", thermal, []),
                (
                    "20m",
                    thermal,
                    [
                        expect("default", thermal, alert_gpu(0), "88", f"GPU 0 on {NODE} is thermally throttled"),
                        expect("default", thermal, alert_gpu(1), "96", f"GPU 1 on {NODE} is thermally throttled"),
                    ],
                ),
            ],
        ),
        case(
            f"{thermal}: 75 °C GPUs with 80 °C memory",
            [
                *(series("DCGM_FI_DEV_GPU_TEMP", gpu(i), "75x30") for i in range(2)),
                *(series("DCGM_FI_DEV_MEMORY_TEMP", gpu(i), "80x30") for i in range(2)),
            ],
            [("20m", thermal, [])],
        ),
    ]
    c["tuned", thermal] = [
        case(
            f"{thermal} (gpu_temp_celsius 80): 82 °C fires, 79 °C does not",
            [series("DCGM_FI_DEV_GPU_TEMP", gpu(0), "82x30"), series("DCGM_FI_DEV_GPU_TEMP", gpu(1), "79x30")],
            [
                (
                    "20m",
                    thermal,
                    [expect("tuned", thermal, alert_gpu(0), "82", f"GPU 0 on {NODE} is thermally throttled")],
                )
            ],
        ),
    ]
    reasons = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
    c["clock_events", thermal] = [
        case(
            f"{thermal} (clock events): SW thermal (0x20) on GPU 0, HW thermal with idle (0x41) on GPU 1",
            [series(reasons, gpu(0), "32x30"), series(reasons, gpu(1), "65x30"), series(reasons, gpu(2), "1x30")],
            [
                (
                    "20m",
                    thermal,
                    [
                        expect("clock_events", thermal, alert_gpu(i), "1", f"GPU {i} on {NODE} is thermally throttled")
                        for i in range(2)
                    ],
                )
            ],
        ),
        case(
            f"{thermal} (clock events): SW power cap (0x4), power brake (0x80), idle (0x1) are not thermal",
            [series(reasons, gpu(0), "4x30"), series(reasons, gpu(1), "128x30"), series(reasons, gpu(2), "1x30")],
            [("20m", thermal, [])],
        ),
    ]

    power = "GPUPowerThrottling"
    l40s = "NVIDIA L40S"
    c["default", power] = [
        case(
            f"{power}: GPU 0 at 700 W for 40 minutes",
            [
                series("DCGM_FI_DEV_POWER_USAGE", gpu(0), "700x50"),
                series("DCGM_FI_DEV_POWER_USAGE", gpu(1), "512.5x50"),
            ],
            [
                ("20m", power, []),
                ("40m", power, [expect("default", power, alert_gpu(0), "700", f"GPU 0 on {NODE} is power throttled")]),
            ],
        ),
        case(
            f"{power}: GPUs at 450 W",
            [series("DCGM_FI_DEV_POWER_USAGE", gpu(i), "450x50") for i in range(2)],
            [("40m", power, [])],
        ),
    ]
    c["tuned", power] = [
        case(
            f"{power} (L40S at 350 W by model): an L40S at 350 W fires, one at 340 W and an H100 at 690 W do not",
            [
                series("DCGM_FI_DEV_POWER_USAGE", gpu(0, model=l40s), "350x50"),
                series("DCGM_FI_DEV_POWER_USAGE", gpu(1, model=l40s), "340x50"),
                series("DCGM_FI_DEV_POWER_USAGE", gpu(2), "690x50"),
            ],
            [
                (
                    "40m",
                    power,
                    [expect("tuned", power, alert_gpu(0, model=l40s), "350", f"GPU 0 on {NODE} is power throttled")],
                )
            ],
        ),
    ]
    c["clock_events", power] = [
        case(
            f"{power} (clock events): HW power brake (0x80) on GPU 0, HW slowdown (0x8) on GPU 1",
            [series(reasons, gpu(0), "128x40"), series(reasons, gpu(1), "8x40"), series(reasons, gpu(2), "0x40")],
            [
                (
                    "35m",
                    power,
                    [
                        expect("clock_events", power, alert_gpu(i), "1", f"GPU {i} on {NODE} is power throttled")
                        for i in range(2)
                    ],
                )
            ],
        ),
        case(
            f"{power} (clock events): running at the power cap (0x4) under load is not alerted",
            [series(reasons, gpu(0), "4x40"), series(reasons, gpu(1), "5x40")],
            [("35m", power, [])],
        ),
    ]

    nvlink = "GPUNVLinkErrors"
    counters = [name for _field, name in ga.NVLINK_COUNTERS]
    c["default", nvlink] = [
        case(
            f"{nvlink}: GPU 0 counts 0.6 CRC data errors and 0.6 replays per second (1.2 in all)",
            [
                series(counters[0], gpu(0), "0x40"),
                series(counters[1], gpu(0), "0+36x40"),
                series(counters[2], gpu(0), "0+36x40"),
                series(counters[3], gpu(0), "0x40"),
                *(series(name, gpu(1), "7x40") for name in counters),
            ],
            [
                ("10m", nvlink, []),
                ("30m", nvlink, [expect("default", nvlink, alert_gpu(0), "1.2", f"GPU 0 on {NODE}: NVLink errors")]),
            ],
        ),
        case(
            f"{nvlink}: 0.1 CRC flit errors per second, below the threshold",
            [series(counters[0], gpu(0), "0+6x40"), *(series(name, gpu(0), "0x40") for name in counters[1:])],
            [("30m", nvlink, [])],
        ),
    ]

    pcie = "GPUPCIeReplayStorm"
    c["default", pcie] = [
        case(
            f"{pcie}: GPU 1 replays 10 packets per second",
            [
                series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", gpu(0), "3x40"),
                series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", gpu(1), "100+600x40"),
            ],
            [("30m", pcie, [expect("default", pcie, alert_gpu(1), "10", f"GPU 1 on {NODE}: PCIe replay storm")])],
        ),
        case(
            f"{pcie}: a few replays (0.1 per second)",
            [series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", gpu(i), "0+6x40") for i in range(2)],
            [("30m", pcie, [])],
        ),
    ]

    fewer = "GPUNodeAdvertisesFewerGPUs"
    eight = [series("DCGM_FI_DEV_GPU_TEMP", gpu(i), "45x30") for i in range(8)]
    c["default", fewer] = [
        case(
            f"{fewer}: the exporter reports 8 GPUs, the node advertises 6",
            [*eight, allocatable(NODE, 6)],
            [
                ("10m", fewer, []),
                (
                    "20m",
                    fewer,
                    [expect("default", fewer, {"node": NODE}, "2", f"Node {NODE} advertises fewer GPUs than it has")],
                ),
            ],
        ),
        case(f"{fewer}: 8 reported, 8 advertised", [*eight, allocatable(NODE, 8)], [("20m", fewer, [])]),
        case(
            f"{fewer}: time-slicing advertises 4 replicas per GPU",
            [*eight, allocatable(NODE, 32)],
            [("20m", fewer, [])],
        ),
        case(
            f"{fewer}: a MIG node (mixed strategy) advertises no whole GPU",
            [
                *(
                    series("DCGM_FI_DEV_GPU_TEMP", gpu(i, GPU_I_PROFILE="3g.40gb", GPU_I_ID=str(j)), "45x30")
                    for i in range(2)
                    for j in (1, 2)
                ),
                allocatable(NODE, 0),
            ],
            [("20m", fewer, [])],
        ),
        case(
            f"{fewer}: a DRA node has no nvidia.com/gpu resource at all",
            eight,
            [("20m", fewer, [])],
        ),
    ]

    down = "GPUExporterDown"
    c["default", down] = [
        case(
            f"{down}: the exporter target stops answering",
            [up("1x5 0x20")],
            [
                ("8m", down, []),
                (
                    "15m",
                    down,
                    [expect("default", down, target(), "0", f"dcgm-exporter target {INSTANCE} is down")],
                ),
            ],
        ),
        case(f"{down}: the target is up", [up("1x20")], [("15m", down, [])]),
    ]

    absent = "GPUExporterAbsent"
    c["default", absent] = [
        case(
            f"{absent}: no dcgm-exporter target at all",
            [allocatable(NODE, 8)],
            [
                (
                    "10m",
                    absent,
                    [
                        expect(
                            "default",
                            absent,
                            {"job": "nvidia-dcgm-exporter"},
                            "1",
                            "No dcgm-exporter target is scraped",
                        )
                    ],
                )
            ],
        ),
        case(f"{absent}: one target, down (GPUExporterDown's case)", [up("0x20")], [("10m", absent, [])]),
    ]

    idle = "GPUAllocatedButIdle"
    workload = gpu(
        0, exported_container="pytorch", exported_namespace="team-a", exported_pod="train-llm-0"
    )  # honorLabels false: the GPU Operator's default
    own_labels = gpu(1, scrape={**target(), "container": "jupyter", "namespace": "team-b", "pod": "notebook-7"})
    summary0, summary1 = f"GPU 0 on {NODE} is allocated but idle", f"GPU 1 on {NODE} is allocated but idle"
    c["default", idle] = [
        case(
            f"{idle}: pods hold GPUs 0 (exported_pod) and 1 (pod, honorLabels true) for 6 hours at 0-3 %",
            [
                series("DCGM_FI_DEV_GPU_UTIL", workload, "0x200 3 0x160"),
                series("DCGM_FI_DEV_GPU_UTIL", own_labels, "0x360"),
            ],
            [
                ("4h10m", idle, []),
                (
                    "5h",
                    idle,
                    [
                        expect(
                            "default",
                            idle,
                            alert_gpu(
                                0,
                                namespace="gpu-operator",
                                pod=EXPORTER_POD,
                                exported_namespace="team-a",
                                exported_pod="train-llm-0",
                            ),
                            "3",
                            summary0,
                        ),
                        expect("default", idle, alert_gpu(1, namespace="team-b", pod="notebook-7"), "0", summary1),
                    ],
                ),
            ],
        ),
        case(
            f"{idle}: an idle GPU no pod holds, a busy held GPU, a GPU held for 2 hours only",
            [
                series("DCGM_FI_DEV_GPU_UTIL", gpu(0), "0x360"),
                series(
                    "DCGM_FI_DEV_GPU_UTIL",
                    gpu(1, exported_container="pytorch", exported_namespace="team-a", exported_pod="train-llm-1"),
                    "0x100 80x100 0x160",
                ),
                series(
                    "DCGM_FI_DEV_GPU_UTIL",
                    gpu(2, exported_container="vllm", exported_namespace="team-c", exported_pod="serve-0"),
                    "_x180 0x180",
                ),
            ],
            [("5h", idle, [])],
        ),
    ]
    # The tuned idle threshold (10 %) lands: 7 % is idle there, not with the default 5 %.
    seven = [series("DCGM_FI_DEV_GPU_UTIL", workload, "7x360")]
    c["tuned", idle] = [
        case(
            f"{idle} (idle_util_percent 10): a pod at 7 % is idle",
            seven,
            [
                (
                    "5h",
                    idle,
                    [
                        expect(
                            "tuned",
                            idle,
                            alert_gpu(
                                0,
                                namespace="gpu-operator",
                                pod=EXPORTER_POD,
                                exported_namespace="team-a",
                                exported_pod="train-llm-0",
                            ),
                            "7",
                            summary0,
                        )
                    ],
                )
            ],
        ),
    ]
    c["default", f"{idle} at 7 %"] = [case(f"{idle}: a pod at 7 % is not idle by default", seven, [("5h", idle, [])])]
    return c


CASES = _cases()


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=200, allow_unicode=True))


@pytest.fixture(scope="module")
def rules_files(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("rules")
    files = {}
    for mode, thresholds in MODES.items():
        files[mode] = out / f"gpu-alerts-{mode}.yml"
        _dump(files[mode], {"groups": ga.rule_groups(thresholds)})
    return files


def test_promtool_check_rules(rules_files):
    r = subprocess.run(
        [_promtool(), "check", "rules", *map(str, rules_files.values())], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(f"SUCCESS: {len(ga.ALERTS)} rules found") == len(MODES), r.stdout


def test_every_alert_fires_and_stays_silent_in_the_default_rules():
    """Every alert has, with the default thresholds, a case where it fires and one where it must stay silent."""
    fires, silent = set(), set()
    for (mode, _alert), groups in CASES.items():
        for g in groups:
            for t in g["alert_rule_test"]:
                if mode == "default":
                    (fires if t["exp_alerts"] else silent).add(t["alertname"])
    assert fires == set(ga.ALERTS) and silent == set(ga.ALERTS)
    # the clock-event mode has both for the two alerts it changes
    changed = {a for mode, a in CASES if mode == "clock_events"}
    assert changed == {"GPUThermalThrottling", "GPUPowerThrottling"}


@pytest.mark.parametrize(("mode", "alert"), list(CASES), ids=[f"{m}-{a}" for m, a in CASES])
def test_promtool_test_rules(mode, alert, rules_files, tmp_path):
    test_file = tmp_path / "test.yml"
    _dump(
        test_file,
        {
            "rule_files": [str(rules_files[mode])],
            "evaluation_interval": "1m",
            "tests": CASES[mode, alert],
        },
    )
    r = subprocess.run([_promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr

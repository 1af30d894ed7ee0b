# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The GPU alert rules' inputs, once: the fault classes and counters the rules select on, every threshold with its
default, kind and range, the checks of user thresholds (as findings), and the exporter's collectors CSV the rules
need. The rules themselves (expressions, alerting rules, the PrometheusRule) are ``_gpu_alerts``, which re-exports
these names; the facts behind the metric names, labels and XID classes are in its module doc."""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._plain import plain

Finding = dict[str, Any]

XID_CLASSES: dict[str, tuple[int, ...]] = {
    "memory": (48, 63, 64, 94, 95, 140),
    "nvlink": (74, 144, 145, 146, 147, 148, 149, 150, 155),
    "bus": (79,),
    "hardware": (46, 62, 109, 110, 119, 120, 143, 158),
    "application": (13, 31, 43, 45),
}

# DCGM_CLOCKS_EVENT_REASON_* bits (go-dcgm dcgm_fields.h).
CLOCK_EVENT_BITS = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
}
THERMAL_BITS = ("sw_thermal", "hw_thermal")
POWER_BITS = ("hw_power_brake", "hw_slowdown")

NVLINK_COUNTERS = (
    ("crc_flit", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"),
    ("crc_data", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"),
    ("replay", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"),
    ("recovery", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"),
)

# Every threshold the rules read. Keys:
#   exporter_job                 job label of the dcgm-exporter targets (the GPU Operator's ServiceMonitor: its
#                                Service's app label, nvidia-dcgm-exporter)
#   exporter_container           the exporter's container name, a scrape target label on every series when the
#                                Prometheus Operator scrapes it (the GPU Operator's: nvidia-dcgm-exporter)
#   xid_for                      for of the hardware XID alerts (memory, NVLink, bus, GPU)
#   xid_application_for          for of GPUXidApplicationError
#   xid_application_window       how long an application XID alerts after it appears
#   ecc_window, ecc_for          an uncorrectable remapped row or double-bit error within the window
#   row_remap_failure_for        for of GPURowRemapFailure
#   fallen_off_bus_lookback      how long a GPU that stopped reporting is remembered (must exceed its for)
#   fallen_off_bus_for           for of GPUFallenOffBus
#   throttle_source              "thresholds" (temperature and power, counters of the default CSV) or "clock_events"
#                                (DCGM_FI_DEV_CLOCKS_EVENT_REASONS bits, which the collectors CSV must add)
#   gpu_temp_celsius             GPU temperature at or above which GPUThermalThrottling fires (thresholds)
#   memory_temp_celsius          memory (HBM) temperature at or above which it fires (thresholds)
#   thermal_for                  for of GPUThermalThrottling
#   power_watts                  power draw at or above which GPUPowerThrottling fires (thresholds)
#   power_watts_by_model         the same per modelName label value, for the models named
#   power_for                    for of GPUPowerThrottling
#   nvlink_errors_per_second     NVLink CRC + replay + recovery errors per second above which GPUNVLinkErrors fires
#   nvlink_window, nvlink_for    the rate's window; for
#   pcie_replays_per_second      PCIe replays per second above which GPUPCIeReplayStorm fires
#   pcie_window, pcie_for        the rate's window; for
#   missing_gpus_for             for of GPUNodeAdvertisesFewerGPUs
#   exporter_down_for            for of GPUExporterDown and GPUExporterAbsent
#   idle_util_percent            GPU utilisation (%) below which an allocated GPU counts as idle
#   idle_window                  how long it must have been held by the same pod and stayed below that
#   idle_for                     for of GPUAllocatedButIdle
DEFAULT_THRESHOLDS: dict[str, Any] = {
    "exporter_job": "nvidia-dcgm-exporter",
    "exporter_container": "nvidia-dcgm-exporter",
    "xid_for": "1m",
    "xid_application_for": "0s",
    "xid_application_window": "1h",
    "ecc_window": "1h",
    "ecc_for": "0s",
    "row_remap_failure_for": "1m",
    "fallen_off_bus_lookback": "1h",
    "fallen_off_bus_for": "5m",
    "throttle_source": "thresholds",
    "gpu_temp_celsius": 85,
    "memory_temp_celsius": 95,
    "thermal_for": "10m",
    "power_watts": 700,
    "power_watts_by_model": {},
    "power_for": "30m",
    "nvlink_errors_per_second": 1,
    "nvlink_window": "10m",
    "nvlink_for": "15m",
    "pcie_replays_per_second": 1,
    "pcie_window": "10m",
    "pcie_for": "15m",
    "missing_gpus_for": "15m",
    "exporter_down_for": "5m",
    "idle_util_percent": 5,
    "idle_window": "4h",
    "idle_for": "30m",
}

THROTTLE_SOURCES = ("thresholds", "clock_events")

# Alert -> the counters it needs that the exporter's default CSVs leave out (add them to the collectors CSV, for
# example through the GPU Operator's dcgmExporter.config ConfigMap). GPUUncorrectableECCError works without its
# optional counter (it reads the remapped rows too); the throttling alerts need theirs only with
# throttle_source: clock_events.
NON_DEFAULT_COUNTERS: dict[str, tuple[str, ...]] = {
    "GPUUncorrectableECCError": ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
    "GPUNVLinkErrors": tuple(counter[1] for counter in NVLINK_COUNTERS),
    "GPUThermalThrottling": ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",),
    "GPUPowerThrottling": ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",),
}

# The collectors CSV of the exporter the GPU Operator runs: dcgm-exporter 4.5.3-4.8.2 ``etc/dcp-metrics-included.csv``
# (Apache-2.0, NVIDIA Corporation), its enabled lines in file order (field, Prometheus type, help). A custom CSV
# replaces this list entirely, so collectors_csv() starts from it.
DEFAULT_COLLECTORS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus in bytes per second."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus in bytes per second."),
)

# The type and help of every counter of NON_DEFAULT_COUNTERS, as a collectors CSV line needs them (the ECC and NVLink
# lines are the ones the default file carries commented out; the clock event reasons are a bit mask, a gauge).
EXTRA_COLLECTORS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors."),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink flow-control CRC errors."),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink data CRC errors."),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink retries."),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("counter", "Total number of NVLink recovery errors."),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("gauge", "Current clock event reasons (bit mask)."),
}

ALERTS = (
    "GPUXidMemoryError",
    "GPUXidNVLinkError",
    "GPUXidFallenOffBus",
    "GPUXidHardwareError",
    "GPUXidApplicationError",
    "GPUUncorrectableECCError",
    "GPURowRemapFailure",
    "GPUFallenOffBus",
    "GPUThermalThrottling",
    "GPUPowerThrottling",
    "GPUNVLinkErrors",
    "GPUPCIeReplayStorm",
    "GPUNodeAdvertisesFewerGPUs",
    "GPUExporterDown",
    "GPUExporterAbsent",
    "GPUAllocatedButIdle",
)

# --- thresholds: kinds, ranges, checks -------------------------------------------------------------------------

_DURATION_RE = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?\Z")
_DURATION_UNITS = (365 * 86400.0, 7 * 86400.0, 86400.0, 3600.0, 60.0, 1.0, 0.001)
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:/-]+\Z")

# key -> (kind, low, high): kind "for" (a duration, 0 allowed), "window" (a duration above 0), "number" (an int or
# float above low and at most high), "name" (a label value), "choice" (throttle_source), "watts_by_model".
_KINDS: dict[str, tuple[str, float, float]] = {
    "exporter_job": ("name", 0, 0),
    "exporter_container": ("name", 0, 0),
    "xid_for": ("for", 0, 0),
    "xid_application_for": ("for", 0, 0),
    "xid_application_window": ("window", 0, 0),
    "ecc_window": ("window", 0, 0),
    "ecc_for": ("for", 0, 0),
    "row_remap_failure_for": ("for", 0, 0),
    "fallen_off_bus_lookback": ("window", 0, 0),
    "fallen_off_bus_for": ("for", 0, 0),
    "throttle_source": ("choice", 0, 0),
    "gpu_temp_celsius": ("number", 0, 150),
    "memory_temp_celsius": ("number", 0, 150),
    "thermal_for": ("for", 0, 0),
    "power_watts": ("number", 0, 5000),
    "power_watts_by_model": ("watts_by_model", 0, 5000),
    "power_for": ("for", 0, 0),
    "nvlink_errors_per_second": ("number", 0, 1e12),
    "nvlink_window": ("window", 0, 0),
    "nvlink_for": ("for", 0, 0),
    "pcie_replays_per_second": ("number", 0, 1e12),
    "pcie_window": ("window", 0, 0),
    "pcie_for": ("for", 0, 0),
    "missing_gpus_for": ("for", 0, 0),
    "exporter_down_for": ("for", 0, 0),
    "idle_util_percent": ("number", 0, 100),
    "idle_window": ("window", 0, 0),
    "idle_for": ("for", 0, 0),
}

# (window key, for key): the alert can only fire when the window outlasts its for.
_WINDOW_OUTLASTS_FOR = (
    ("xid_application_window", "xid_application_for", "GPUXidApplicationError"),
    ("ecc_window", "ecc_for", "GPUUncorrectableECCError"),
    ("fallen_off_bus_lookback", "fallen_off_bus_for", "GPUFallenOffBus"),
)


def duration_seconds(value: Any) -> float | None:
    """A Prometheus duration (``1h30m``, ``90s``, ``0``) in seconds; None when it is not one."""
    if not isinstance(value, str) or not value:
        return None
    if value == "0":
        return 0.0
    m = _DURATION_RE.match(value)
    if not m:
        return None
    return sum(int(n) * _DURATION_UNITS[i] for i, n in enumerate(m.groups()) if n is not None)


def _finding(fid: str, key: str, value: Any, cause: str, fix: str, variable: str, severity: str = "error") -> Finding:
    name = f"{variable}.{key}" if variable and key else (variable or key)
    return {
        "id": fid,
        "severity": severity,
        "object": {"kind": "variable", "name": name},
        "evidence": [f"{name}: {json.dumps(value, sort_keys=True, default=str)}"],
        "cause": cause,
        "fix": fix,
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def _number_problem(value: Any, low: float, high: float) -> str:
    if not _is_number(value):
        return f"it is {type(value).__name__}, not a number"
    if value <= low or value > high:
        return f"it is outside ({low:g}, {high:g}]"
    return ""


def _check_key(key: str, value: Any, variable: str) -> list[Finding]:
    kind, low, high = _KINDS[key]
    default = DEFAULT_THRESHOLDS[key]
    if kind in ("for", "window"):
        seconds = duration_seconds(value)
        if seconds is None:
            return [
                _finding(
                    "gpu-alerts-duration-invalid",
                    key,
                    value,
                    f"{key} is not a Prometheus duration (digits and units y, w, d, h, m, s, ms, largest first).",
                    f'Write it like "{default}" or "1h30m".',
                    variable,
                )
            ]
        if kind == "window" and seconds <= 0:
            return [
                _finding(
                    "gpu-alerts-window-zero",
                    key,
                    value,
                    f"{key} is a range-vector window and Prometheus refuses a zero range.",
                    f'Set a positive duration (default "{default}").',
                    variable,
                )
            ]
        return []
    if kind == "number":
        problem = _number_problem(value, low, high)
        if problem:
            return [
                _finding(
                    "gpu-alerts-threshold-invalid",
                    key,
                    value,
                    f"{key} must be a number above {low:g} and at most {high:g}: {problem}.",
                    f"Set a number in that range (default {default}).",
                    variable,
                )
            ]
        return []
    if kind == "name":
        if not isinstance(value, str) or not _NAME_RE.match(value):
            return [
                _finding(
                    "gpu-alerts-name-invalid",
                    key,
                    value,
                    f"{key} is a label value the rules select on; it must be a non-empty string of letters, digits "
                    "and _ . : / -.",
                    f'Set it to the value Prometheus shows (default "{default}").',
                    variable,
                )
            ]
        return []
    if kind == "choice":
        if value not in THROTTLE_SOURCES:
            return [
                _finding(
                    "gpu-alerts-throttle-source-invalid",
                    key,
                    value,
                    f"{key} must be one of {', '.join(THROTTLE_SOURCES)}.",
                    '"thresholds" reads temperature and power (default CSV); "clock_events" reads '
                    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS, which the exporter's collectors CSV must then list.",
                    variable,
                )
            ]
        return []
    # watts_by_model: {modelName: watts}
    if not isinstance(value, Mapping):
        return [
            _finding(
                "gpu-alerts-threshold-invalid",
                key,
                value,
                f"{key} must be a mapping of GPU model name (the exporter's modelName label) to watts.",
                'Write it like {"NVIDIA H100 80GB HBM3": 700}, or {} to use power_watts for every model.',
                variable,
            )
        ]
    out: list[Finding] = []
    for model, watts in value.items():
        problem = "" if isinstance(model, str) and model.strip() else "the model name is empty or not a string"
        problem = problem or _number_problem(watts, low, high)
        if problem:
            out.append(
                _finding(
                    "gpu-alerts-threshold-invalid",
                    f"{key}[{json.dumps(model, default=str)}]",
                    watts,
                    f"{key} maps a modelName label value to a power draw in watts above 0 and at most {high:g}: "
                    f"{problem}.",
                    "Name the model as the exporter's modelName label shows it and give the watts as a number.",
                    variable,
                )
            )
    return out


def threshold_findings(thresholds: Any, variable: str = "") -> list[Finding]:
    """Every problem of the given thresholds (a partial mapping: missing keys take their default), as findings.
    ``variable`` names the role variable that holds them, for the findings' object and evidence."""
    if thresholds is None:
        thresholds = {}
    if not isinstance(thresholds, Mapping):
        return [
            _finding(
                "gpu-alerts-thresholds-not-a-mapping",
                "",
                thresholds,
                "The thresholds must be a mapping of threshold name to value.",
                "Give a mapping such as {idle_util_percent: 5}, or {} for the defaults.",
                variable or "thresholds",
            )
        ]
    out: list[Finding] = []
    for key in thresholds:
        if key not in DEFAULT_THRESHOLDS:
            close = difflib.get_close_matches(str(key), list(DEFAULT_THRESHOLDS), n=1)
            out.append(
                _finding(
                    "gpu-alerts-threshold-unknown",
                    str(key),
                    thresholds[key],
                    f"{key} is not a threshold of the GPU alerts" + (f"; did you mean {close[0]}?" if close else "."),
                    "Use one of: " + ", ".join(sorted(DEFAULT_THRESHOLDS)) + ".",
                    variable,
                )
            )
    merged = {**DEFAULT_THRESHOLDS, **{k: v for k, v in thresholds.items() if k in DEFAULT_THRESHOLDS}}
    for key in DEFAULT_THRESHOLDS:
        if key in thresholds:
            out.extend(_check_key(key, merged[key], variable))
    if out:
        return out
    for window_key, for_key, alert in _WINDOW_OUTLASTS_FOR:
        window, hold = duration_seconds(merged[window_key]), duration_seconds(merged[for_key])
        if window is not None and hold is not None and window <= hold:
            out.append(
                {
                    **_finding(
                        "gpu-alerts-window-shorter-than-for",
                        window_key,
                        merged[window_key],
                        f"{alert} forgets its fault after {window_key} but must see it for {for_key} first, so it "
                        "can never fire.",
                        f"Make {window_key} longer than {for_key}.",
                        variable,
                    ),
                    "evidence": [
                        f"{window_key}: {merged[window_key]}",
                        f"{for_key}: {merged[for_key]}",
                    ],
                }
            )
    return out


def merged_thresholds(thresholds: Mapping[str, Any] | None) -> dict[str, Any]:
    """The defaults overridden by the given thresholds; ValueError naming every problem when they are not valid."""
    errors = [f for f in threshold_findings(thresholds) if f["severity"] == "error"]
    if errors:
        raise ValueError("; ".join(f"{'; '.join(f['evidence'])}: {f['cause']}" for f in errors))
    merged = copy.deepcopy(DEFAULT_THRESHOLDS)
    merged.update(plain(dict(thresholds or {})))
    return merged


def non_default_counters(thresholds: Mapping[str, Any] | None = None) -> dict[str, list[str]]:
    """Alert -> the counters its rule reads that the exporter's default collectors CSVs leave out, for the rules these
    thresholds build (the throttling alerts read one only with ``throttle_source: clock_events``)."""
    t = merged_thresholds(thresholds)
    return {
        alert: list(names)
        for alert, names in NON_DEFAULT_COUNTERS.items()
        if alert not in ("GPUThermalThrottling", "GPUPowerThrottling") or t["throttle_source"] == "clock_events"
    }


def collectors_csv(thresholds: Mapping[str, Any] | None = None) -> str:
    """The exporter's collectors CSV (key ``dcgm-metrics.csv`` of the ConfigMap the ClusterPolicy's
    ``dcgmExporter.config.name`` names) for the rules these thresholds build: the default list, then every counter
    of :func:`non_default_counters` once, in the order the alerts name them."""
    extra: list[str] = []
    for names in non_default_counters(thresholds).values():
        extra.extend(n for n in names if n not in extra)
    lines = [
        "# gpuops.platform: dcgm-exporter's default collectors (dcp-metrics-included.csv), then the counters the",
        "# GPU alert rules read that it leaves out. Format: DCGM field, Prometheus type, help.",
    ]
    lines += [f"{field}, {kind}, {text}" for field, kind, text in DEFAULT_COLLECTORS]
    lines += [f"{name}, {EXTRA_COLLECTORS[name][0]}, {EXTRA_COLLECTORS[name][1]}" for name in extra]
    return "\n".join(lines) + "\n"


def collected_fields(csv_text: str) -> list[str]:
    """The DCGM fields a collectors CSV enables (comment and blank lines skipped), as dcgm-exporter parses it."""
    out = []
    for line in csv_text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line.split(",", 1)[0].strip())
    return out


def missing_counters(thresholds: Mapping[str, Any] | None, csv_text: str | None) -> dict[str, list[str]]:
    """Alert -> the counters its rule reads that this collectors CSV does not enable (``None`` or empty: the
    exporter's default list)."""
    fields = set(collected_fields(csv_text) if csv_text else (row[0] for row in DEFAULT_COLLECTORS))
    out = {}
    for alert, names in non_default_counters(thresholds).items():
        missing = [n for n in names if n not in fields]
        if missing:
            out[alert] = missing
    return out

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The GPU alert rules, once: pure functions (no I/O) that turn thresholds into Prometheus alerting rules.

- :data:`DEFAULT_THRESHOLDS`: every threshold, ``for`` and window, and the names the rules select on (keys
  documented in ``monitoring/_gpu_alert_thresholds.py`` and in ``docs/observability.md``).
- :func:`threshold_findings`: the thresholds checked (unknown key, type, range, duration syntax, a window that lets
  an alert never fire) as findings ``{id, severity, object, evidence, cause, fix}`` like every rule of the collection.
- :func:`rule_groups`: the ``groups`` list, usable as a plain Prometheus rules file and as a PrometheusRule's spec.
- :func:`prometheus_rule`: the ``monitoring.coreos.com/v1`` PrometheusRule object.

Facts the rules rely on (checked 2026-11-25):

- Metric names: NVIDIA/dcgm-exporter tag 4.5.3-4.8.2 (commit 691c92762eb5), ``etc/default-counters.csv`` and
  ``etc/dcp-metrics-included.csv`` (the GPU Operator v26.7.0 sets ``DCGM_EXPORTER_COLLECTORS`` to the latter in
  ``assets/state-dcgm-exporter/0800_daemonset.yaml``). Both enable ``DCGM_FI_DEV_XID_ERRORS``,
  ``DCGM_FI_DEV_PCIE_REPLAY_COUNTER``, ``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS``, ``DCGM_FI_DEV_ROW_REMAP_FAILURE``,
  ``DCGM_FI_DEV_GPU_TEMP``, ``DCGM_FI_DEV_MEMORY_TEMP``, ``DCGM_FI_DEV_POWER_USAGE``, ``DCGM_FI_DEV_GPU_UTIL``; they
  list but comment out ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` and the four ``DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL``
  counters. ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` (field 112; the old name ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` is an
  alias) is in neither file: NVIDIA/go-dcgm ``pkg/dcgm/const_fields.go`` at ec245c09fe3e, the version dcgm-exporter
  4.5.3-4.8.2 pins, maps the name, so a collectors CSV line ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, ...`` exports it.
  :data:`NON_DEFAULT_COUNTERS` says which alert needs which.
- Labels (``internal/pkg/rendermetrics/render_metrics.go``, ``internal/pkg/collector/gpu_collector.go``,
  ``internal/pkg/transformation/kubernetes.go`` and ``const.go`` at the same tag): every GPU series carries ``gpu``,
  ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname`` (the ``NODE_NAME`` the GPU Operator sets from
  ``spec.nodeName``), the label counters (``DCGM_FI_DRIVER_VERSION``), and for a GPU a pod holds ``pod``,
  ``namespace``, ``container``. ``DCGM_FI_DEV_XID_ERRORS`` also carries ``err_code`` (the XID) and ``err_msg`` (since
  3.3.6-3.4.2). Scraped through the GPU Operator's ServiceMonitor (``jobLabel: app``, so ``job`` is
  ``nvidia-dcgm-exporter``; ``honorLabels`` defaults to false), the exporter's own pod's ``pod``, ``namespace`` and
  ``container`` target labels win and the workload's become ``exported_pod``, ``exported_namespace`` and
  ``exported_container``; a GPU no pod holds still carries the exporter's ``pod`` target label. The idle rule reads
  both layouts (see :func:`_idle`).
- ``DCGM_FI_DEV_XID_ERRORS`` is the last XID seen, not a count: it stays at that value until another XID or an
  exporter restart (NVIDIA/DCGM issue 277, NVIDIA/dcgm-exporter issues 190 and 500). Hardware XIDs therefore fire
  while the value holds (a GPU reset clears it with the fault); application XIDs fire only for a window after they
  appear. DCGM has been reported unable to see XIDs 79, 119 and 120 through NVML (NVIDIA/DCGM issue 162), which is
  why a GPU whose series vanish has its own alert (``GPUFallenOffBus``).
- XID classes: NVIDIA's Xid catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, column
  "Resolution Bucket (Immediate Action)"), as NVIDIA ships it in NVIDIA/NVSentinel
  ``distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv`` (commit 6f8b0fcf): 13, 31 are
  RESTART_APP, 43 IGNORE, 45 a preemptive cleanup after an earlier error - the application's fault; 48 (double-bit
  ECC), 63/64 (row remap recorded / failed), 94/95 (contained / uncontained ECC), 140 (unrecovered ECC) - memory;
  74, 144-150, 155 - NVLink; 79 - fallen off the bus (RESTART_BM); 46, 62, 109, 110, 119, 120 (GSP RPC timeout, GSP
  error), 143, 158 - RESET_GPU. The catalog rates 63 IGNORE and 94 RESTART_APP; both are kept with memory because
  the row they record is only remapped at the next GPU reset.
- Clock event reason bits: NVIDIA/go-dcgm ``pkg/dcgm/dcgm_fields.h`` (``DCGM_CLOCKS_EVENT_REASON_*``) and dcgm-exporter
  ``internal/pkg/collector/clock_events_collector.go``: SW_POWER_CAP 0x4, HW_SLOWDOWN 0x8, SW_THERMAL 0x20,
  HW_THERMAL 0x40, HW_POWER_BRAKE 0x80.
- ``kube_node_status_allocatable{node, resource="nvidia_com_gpu", unit="integer"}``: kubernetes/kube-state-metrics
  v2.20.0 ``internal/store/node.go`` (resource names pass through ``SanitizeLabelName``) and ``node_test.go``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.monitoring._gpu_alert_thresholds import (  # re-exported
    ALERTS,
    CLOCK_EVENT_BITS,
    DEFAULT_COLLECTORS,
    DEFAULT_THRESHOLDS,
    EXTRA_COLLECTORS,
    NON_DEFAULT_COUNTERS,
    NVLINK_COUNTERS,
    POWER_BITS,
    THERMAL_BITS,
    THROTTLE_SOURCES,
    XID_CLASSES,
    _finding,
    collected_fields,
    collectors_csv,
    duration_seconds,
    merged_thresholds,
    missing_counters,
    non_default_counters,
    threshold_findings,
)

# the rules' inputs (monitoring/_gpu_alert_thresholds.py) are read through this module too
__all__ = [
    "ALERTS",
    "API_VERSION",
    "CLOCK_EVENT_BITS",
    "DEFAULT_COLLECTORS",
    "DEFAULT_THRESHOLDS",
    "EXTRA_COLLECTORS",
    "GPU",
    "KIND",
    "NON_DEFAULT_COUNTERS",
    "NVLINK_COUNTERS",
    "POWER_BITS",
    "THERMAL_BITS",
    "THROTTLE_SOURCES",
    "XID_CLASSES",
    "collected_fields",
    "collectors_csv",
    "duration_seconds",
    "merged_thresholds",
    "missing_counters",
    "non_default_counters",
    "object_findings",
    "prometheus_rule",
    "rule_groups",
    "threshold_findings",
]

Finding = dict[str, Any]

API_VERSION = "monitoring.coreos.com/v1"
KIND = "PrometheusRule"

# The labels that name one GPU in an alert: dcgm-exporter's, without the scrape target's (pod, instance), so that an
# alert keeps its identity when the exporter pod is replaced or the GPU changes hands. pci_bus_id is kept for the
# remediation pipeline, which records the GPU's PCI address on the quarantined node (_fault_policy).
GPU = "Hostname, UUID, gpu, pci_bus_id, modelName"

# --- expressions -------------------------------------------------------------------------------------------------


def _q(value: str) -> str:
    """A PromQL string literal (double-quoted, Go escapes; JSON's escapes are a subset)."""
    return json.dumps(value)


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def _alternation(codes: tuple[int, ...]) -> str:
    return "|".join(str(c) for c in codes)


def _bit_set(metric: str, names: tuple[str, ...]) -> str:
    """Any of the named DCGM_CLOCKS_EVENT_REASON bits set in a gauge: PromQL has no bitwise AND, so bit b of v is
    floor(v / b) % 2 (b a power of two)."""
    return " or ".join(f"(floor({metric} / {CLOCK_EVENT_BITS[n]}) % 2 == 1)" for n in names)


def _xid(codes: tuple[int, ...]) -> str:
    return f'max by ({GPU}, err_code, err_msg) (DCGM_FI_DEV_XID_ERRORS{{err_code=~"{_alternation(codes)}"}})'


def _xid_application(t: Mapping[str, Any]) -> str:
    codes = _alternation(XID_CLASSES["application"])
    return (
        f"max by ({GPU}, err_code, err_msg) (\n"
        f'  DCGM_FI_DEV_XID_ERRORS{{err_code=~"{codes}"}}\n'
        f"  unless on (Hostname, UUID, err_code) (DCGM_FI_DEV_XID_ERRORS offset {t['xid_application_window']})\n"
        ")"
    )


def _ecc(t: Mapping[str, Any]) -> str:
    w = t["ecc_window"]
    return (
        f"max by ({GPU}) (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[{w}])) > 0\n"
        f"or\nmax by ({GPU}) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{w}])) > 0"
    )


def _fallen_off_bus(t: Mapping[str, Any]) -> str:
    lookback, job = t["fallen_off_bus_lookback"], _q(t["exporter_job"])
    return (
        f"(\n  max by ({GPU}) (last_over_time(DCGM_FI_DEV_GPU_TEMP[{lookback}]))\n"
        "  unless on (Hostname, UUID) DCGM_FI_DEV_GPU_TEMP\n)\n"
        "and on (Hostname)\n"
        f"max by (Hostname) (last_over_time(DCGM_FI_DEV_GPU_TEMP[{lookback}]) and on (instance) (up{{job={job}}} == 1))"
    )


def _thermal(t: Mapping[str, Any]) -> str:
    if t["throttle_source"] == "clock_events":
        return f"max by ({GPU}) ({_bit_set('DCGM_FI_DEV_CLOCKS_EVENT_REASONS', THERMAL_BITS)})"
    return (
        f"max by ({GPU}) (DCGM_FI_DEV_GPU_TEMP) >= {_num(t['gpu_temp_celsius'])}\n"
        f"or\nmax by ({GPU}) (DCGM_FI_DEV_MEMORY_TEMP) >= {_num(t['memory_temp_celsius'])}"
    )


def _power(t: Mapping[str, Any]) -> str:
    if t["throttle_source"] == "clock_events":
        return f"max by ({GPU}) ({_bit_set('DCGM_FI_DEV_CLOCKS_EVENT_REASONS', POWER_BITS)})"
    by_model = t["power_watts_by_model"]
    parts = [
        f"max by ({GPU}) (DCGM_FI_DEV_POWER_USAGE{{modelName={_q(model)}}}) >= {_num(watts)}"
        for model, watts in sorted(by_model.items())
    ]
    others = ", ".join(f"modelName!={_q(model)}" for model in sorted(by_model))
    selector = f"{{{others}}}" if others else ""
    parts.append(f"max by ({GPU}) (DCGM_FI_DEV_POWER_USAGE{selector}) >= {_num(t['power_watts'])}")
    return "\nor\n".join(parts)


def _nvlink(t: Mapping[str, Any]) -> str:
    # One rate per counter, tagged so that they can be summed: rate() drops the metric name, and four counters with
    # the same GPU labels would otherwise collide. max by GPU first: a GPU shared by several pods has a series each.
    w = t["nvlink_window"]
    terms = "\n  or ".join(
        f'label_replace(max by ({GPU}) (rate({name}[{w}])), "counter", "{tag}", "", "")'
        for tag, name in NVLINK_COUNTERS
    )
    return f"sum by ({GPU}) (\n  {terms}\n) > {_num(t['nvlink_errors_per_second'])}"


def _pcie(t: Mapping[str, Any]) -> str:
    return (
        f"max by ({GPU}) (rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[{t['pcie_window']}])) "
        f"> {_num(t['pcie_replays_per_second'])}"
    )


def _fewer_gpus() -> str:
    # GPUs the exporter reports per node (one per UUID, whatever pods hold them) minus the node's allocatable
    # nvidia.com/gpu. Nodes without that resource (DRA) have no allocatable series and are left out; nodes with MIG
    # (series with GPU_I_PROFILE) advertise MIG devices, not GPUs, and are left out.
    per_node = 'label_replace(count by (Hostname, UUID) (DCGM_FI_DEV_GPU_TEMP), "node", "$1", "Hostname", "(.+)")'
    mig = (
        'label_replace(count by (Hostname) (DCGM_FI_DEV_GPU_TEMP{GPU_I_PROFILE!=""}), "node", "$1", "Hostname", "(.+)")'
    )
    return (
        f"(\n  count by (node) ({per_node})\n"
        '  - on (node) max by (node) (kube_node_status_allocatable{resource="nvidia_com_gpu"})\n'
        f") > 0\nunless on (node) {mig}"
    )


def _idle(t: Mapping[str, Any]) -> str:
    # A GPU a pod holds: exported_pod set (scraped with honorLabels false, the GPU Operator's default), or pod set by
    # the exporter itself (honorLabels true, or a scrape without pod target labels), which is told from the exporter's
    # own pod target label by the container: the exporter's container is not the workload's.
    w, pct = t["idle_window"], _num(t["idle_util_percent"])
    labels = f"{GPU}, namespace, pod, exported_namespace, exported_pod"
    selectors = (
        'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}',
        f'DCGM_FI_DEV_GPU_UTIL{{pod!="", exported_pod="", container!={_q(t["exporter_container"])}}}',
    )
    terms = "\n  or ".join(f"(max_over_time({s}[{w}]) < {pct} and {s} offset {w})" for s in selectors)
    return f"max by ({labels}) (\n  {terms}\n)"


# --- rules -------------------------------------------------------------------------------------------------------

_ON_GPU = "GPU {{ $labels.gpu }} ({{ $labels.modelName }}, {{ $labels.UUID }}) on {{ $labels.Hostname }}"


def _rule(alert: str, expr: str, hold: str, severity: str, summary: str, description: str, runbook: str) -> dict:
    return {
        "alert": alert,
        "expr": expr,
        "for": hold,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description, "runbook": runbook},
    }


def _xid_rule(alert: str, xid_class: str, what: str, t: Mapping[str, Any], runbook: str) -> dict:
    rule = _rule(
        alert,
        _xid(XID_CLASSES[xid_class]),
        t["xid_for"],
        "critical",
        f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.Hostname }}}}: XID {{{{ $labels.err_code }}}} ({what})",
        f"{_ON_GPU} last reported XID {{{{ $labels.err_code }}}} ({{{{ $labels.err_msg }}}}), a {what} fault. "
        "The exporter keeps showing the last XID until the GPU is reset or the exporter restarts.",
        runbook,
    )
    rule["labels"]["xid_class"] = xid_class
    return rule


def _health_rules(t: Mapping[str, Any]) -> list[dict]:
    clock = t["throttle_source"] == "clock_events"
    thermal_description = (
        f"{_ON_GPU} has its SW or HW thermal slowdown clock event reason set "
        "(DCGM_FI_DEV_CLOCKS_EVENT_REASONS bits 0x20 or 0x40)."
        if clock
        else f"{_ON_GPU} is at {{{{ $value }}}} °C, at or above the threshold "
        f"(GPU {_num(t['gpu_temp_celsius'])} °C, memory {_num(t['memory_temp_celsius'])} °C): its clocks are being, "
        "or are about to be, slowed to cool it."
    )
    power_description = (
        f"{_ON_GPU} has its HW power brake or HW slowdown clock event reason set "
        "(DCGM_FI_DEV_CLOCKS_EVENT_REASONS bits 0x80 or 0x8): its clocks are cut by half or more."
        if clock
        else f"{_ON_GPU} draws {{{{ $value }}}} W, at or above its power threshold, so its clocks are held down by "
        "the power limit."
    )
    return [
        _xid_rule(
            "GPUXidMemoryError",
            "memory",
            t=t,
            what="memory/ECC",
            runbook=(
                "Cause: the GPU's memory had an uncorrectable (double-bit) or contained/uncontained ECC error, or the "
                "row remapper recorded or failed to record a bad row (XID 48, 63, 64, 94, 95, 140). Work on this GPU "
                "may have read corrupted data. Fix: drain the node (kubectl drain), reset the GPU (nvidia-smi -r "
                "-i <gpu>) or reboot so the pending row remap takes effect, then check nvidia-smi -q -d "
                "ROW_REMAPPER: if remapping failed or keeps recurring, the GPU needs replacement (RMA)."
            ),
        ),
        _xid_rule(
            "GPUXidNVLinkError",
            "nvlink",
            t=t,
            what="NVLink",
            runbook=(
                "Cause: an NVLink link of this GPU failed (XID 74, 144-150, 155): peer-to-peer traffic and NCCL jobs "
                "across the link fail or hang. Fix: drain the node, reset the GPUs (on NVSwitch systems restart "
                "nvidia-fabricmanager after the reset) or reboot; check nvidia-smi nvlink -s and -e. A link that "
                "fails again points at the GPU, the baseboard or the NVSwitch tray: open a hardware case."
            ),
        ),
        _xid_rule(
            "GPUXidFallenOffBus",
            "bus",
            t=t,
            what="fallen off the bus",
            runbook=(
                "Cause: the GPU stopped answering on PCIe (XID 79): the driver can no longer reach it, and every "
                "process on it has failed. Usual roots are power delivery, overheating or a PCIe link fault. Fix: "
                "drain the node and power-cycle it (a warm reboot is often not enough); check the BMC's event log "
                "for power and thermal events and reseat the GPU if it recurs; open a hardware case if it does."
            ),
        ),
        _xid_rule(
            "GPUXidHardwareError",
            "hardware",
            t=t,
            what="GPU firmware/hardware",
            runbook=(
                "Cause: the GPU or its GSP firmware stopped responding or hit a fatal fault (XID 46, 62, 109, 110, "
                "119, 120, 143, 158); NVIDIA's Xid catalog says reset the GPU. Fix: drain the node, reset the GPU "
                "(nvidia-smi -r -i <gpu>) or reboot. If it recurs, collect nvidia-bug-report.sh, compare the driver "
                "version (DCGM_FI_DRIVER_VERSION) against NVIDIA's known issues and open a case."
            ),
        ),
        _rule(
            "GPUXidApplicationError",
            _xid_application(t),
            t["xid_application_for"],
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}: application XID {{ $labels.err_code }}",
            f"{_ON_GPU} reported XID {{{{ $labels.err_code }}}} ({{{{ $labels.err_msg }}}}) within the last "
            f"{t['xid_application_window']}: the faulting application was stopped; the GPU itself is not at fault.",
            "Cause: a program on this GPU made an illegal memory access or an engine exception (XID 13, 31), or "
            "the driver cleaned up after one (XID 43, 45). The GPU stays usable. Fix: find the pod that held the "
            "GPU at that time and look at its logs (CUDA errors such as an illegal address); fix the program or its "
            "framework/driver versions. Repeated XIDs on one GPU with different programs point at the hardware: run "
            "dcgmi diag -r 3.",
        ),
        _rule(
            "GPUUncorrectableECCError",
            _ecc(t),
            t["ecc_for"],
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}: uncorrectable memory error",
            f"{_ON_GPU} remapped a memory row for an uncorrectable error, or counted a double-bit ECC error, within "
            f"the last {t['ecc_window']}.",
            "Cause: the GPU's memory returned data it could not correct; the work using it may have computed on "
            "corrupted data and the row is only replaced after a GPU reset. Fix: drain the node, reset the GPU "
            "(nvidia-smi -r -i <gpu>) or reboot, then check nvidia-smi -q -d ROW_REMAPPER (Pending: No, "
            "Remapping Failure Occurred: No). Rerun the affected jobs. Recurring errors mean replacing the GPU.",
        ),
        _rule(
            "GPURowRemapFailure",
            f"max by ({GPU}) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            t["row_remap_failure_for"],
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}: memory row remapping failed",
            f"{_ON_GPU} reports that remapping a bad memory row failed (DCGM_FI_DEV_ROW_REMAP_FAILURE = 1): it has "
            "no spare rows left for the failing bank.",
            "Cause: the GPU ran out of spare memory rows to replace failing ones; its memory can no longer be "
            "trusted. Fix: cordon the node and keep work off this GPU (or the node), confirm with nvidia-smi -q -d "
            "ROW_REMAPPER and dcgmi diag -r 3, and replace the GPU (RMA). A reset does not clear this.",
        ),
        _rule(
            "GPUFallenOffBus",
            _fallen_off_bus(t),
            t["fallen_off_bus_for"],
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} stopped reporting",
            f"{_ON_GPU} reported within the last {t['fallen_off_bus_lookback']} but has no series now, while the "
            "node's dcgm-exporter is up and scraped: the GPU has most likely fallen off the bus.",
            "Cause: the GPU vanished from the driver (XID 79, which DCGM does not always report, a GSP hang, or a "
            "PCIe link down) while the node and its exporter still run. Fix: on the node run nvidia-smi (the GPU is "
            "missing or 'Unknown Error') and look for Xid lines in the kernel log (journalctl -k | grep -i xid); "
            "drain the node and power-cycle it; if the GPU stays missing, check the BMC event log and open a "
            "hardware case.",
        ),
        _rule(
            "GPUThermalThrottling",
            _thermal(t),
            t["thermal_for"],
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is thermally throttled",
            thermal_description,
            "Cause: the GPU or its memory is too hot, so it lowers its clocks and runs slower; sustained, it can "
            "end in a thermal shutdown. Usual roots are cooling (fans, airflow, blanking panels, liquid loop), a "
            "hot aisle, or a failing GPU heatsink. Fix: check nvidia-smi -q -d TEMPERATURE,PERFORMANCE and the "
            "BMC's fan and inlet readings; fix the cooling. A single hot GPU among cool ones is a hardware fault.",
        ),
        _rule(
            "GPUPowerThrottling",
            _power(t),
            t["power_for"],
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is power throttled",
            power_description,
            "Cause: the GPU's clocks are held down by power: it runs at its power limit, or the system's power "
            "supply asserted a power brake (HW slowdown). At the power limit under a full load this is expected; a "
            "power brake is not. Fix: check nvidia-smi -q -d POWER,PERFORMANCE (Clocks Event Reasons) and the "
            "BMC's PSU events; make sure every PSU is fed and healthy and the power limit is the product's default "
            "(nvidia-smi -pl). Tune the threshold per model if a full load should not alert.",
        ),
        _rule(
            "GPUNVLinkErrors",
            _nvlink(t),
            t["nvlink_for"],
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}: NVLink errors",
            f"{_ON_GPU} counts {{{{ $value | humanize }}}} NVLink errors per second (CRC flit, CRC data, replay and "
            f"recovery, over {t['nvlink_window']}), above {_num(t['nvlink_errors_per_second'])}.",
            "Cause: a degraded NVLink link retransmits data (CRC errors, replays) or retrains (recovery): "
            "multi-GPU jobs slow down, and the link may fail (XID 74). Fix: check nvidia-smi nvlink -e -i <gpu> "
            "for the link with growing counters; drain the node and reset the GPUs (restart nvidia-fabricmanager on "
            "NVSwitch systems); if the errors return, the GPU, baseboard or NVSwitch tray needs service.",
        ),
        _rule(
            "GPUPCIeReplayStorm",
            _pcie(t),
            t["pcie_for"],
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}: PCIe replay storm",
            f"{_ON_GPU} replays {{{{ $value | humanize }}}} PCIe packets per second (over {t['pcie_window']}), "
            f"above {_num(t['pcie_replays_per_second'])}.",
            "Cause: the PCIe link between the GPU and its switch or CPU corrupts packets, which are sent again: "
            "host-to-GPU transfers slow down and the link may drop (the GPU falls off the bus). Usual roots are a "
            "badly seated GPU or riser, a damaged cable/retimer, or a link trained at a lower speed. Fix: check "
            "nvidia-smi -q -d PCIE (link generation and width against the maximum) and lspci -vv for AER errors; "
            "drain the node and reseat the GPU or riser; open a hardware case if it continues.",
        ),
    ]


def _capacity_rules(t: Mapping[str, Any]) -> list[dict]:
    job = _q(t["exporter_job"])
    return [
        _rule(
            "GPUNodeAdvertisesFewerGPUs",
            _fewer_gpus(),
            t["missing_gpus_for"],
            "warning",
            "Node {{ $labels.node }} advertises fewer GPUs than it has",
            "Node {{ $labels.node }} has {{ $value }} GPU(s) that its dcgm-exporter reports but that are not in "
            "its allocatable nvidia.com/gpu: pods cannot be scheduled on them.",
            "Cause: the NVIDIA device plugin marked GPUs unhealthy (an XID it treats as fatal, a GPU that failed "
            "its health check) or is not running on the node, or the node's GPU sharing configuration changed. "
            "Fix: check kubectl describe node <node> (Allocatable nvidia.com/gpu) and the device plugin pod's log "
            "on that node (nvidia-device-plugin-daemonset, 'unhealthy'); fix the GPU's fault (see the node's other "
            "GPU alerts), then restart the device plugin pod so it registers the GPUs again.",
        ),
        _rule(
            "GPUExporterDown",
            f"up{{job={job}}} == 0",
            t["exporter_down_for"],
            "warning",
            "dcgm-exporter target {{ $labels.instance }} is down",
            "Prometheus cannot scrape the dcgm-exporter at {{ $labels.instance }} (pod {{ $labels.pod }}): the GPU "
            "alerts of that node are blind.",
            "Cause: the exporter pod is crashing or not ready (often: the driver is not loaded, DCGM cannot start, "
            "or the pod-resources socket is missing), or the network between Prometheus and the node blocks port "
            "9400. Fix: kubectl -n <gpu-operator namespace> get pods -l app=nvidia-dcgm-exporter -o wide, then "
            "kubectl logs the failing pod; check that nvidia-smi works on the node and that the GPU Operator's "
            "validator passed.",
        ),
        _rule(
            "GPUExporterAbsent",
            f"absent(up{{job={job}}})",
            t["exporter_down_for"],
            "warning",
            "No dcgm-exporter target is scraped",
            f"Prometheus has no scrape target with job {t['exporter_job']}: no GPU is monitored and no GPU alert can "
            "fire.",
            "Cause: the dcgm-exporter is not deployed (dcgmExporter.enabled is false in the ClusterPolicy), or "
            "Prometheus does not select its ServiceMonitor (the ServiceMonitor is missing, lacks the labels the "
            "Prometheus serviceMonitorSelector wants, or lives in a namespace Prometheus does not watch), or the job "
            "label differs from the one the rules expect. Fix: kubectl get servicemonitors -A | grep dcgm, compare "
            "its labels with the Prometheus object's serviceMonitorSelector, and check the targets page; set the "
            "exporter_job threshold if the job is named differently.",
        ),
        _rule(
            "GPUAllocatedButIdle",
            _idle(t),
            t["idle_for"],
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is allocated but idle",
            f"{_ON_GPU} has been held by pod {{{{ or $labels.exported_namespace $labels.namespace }}}}/"
            f"{{{{ or $labels.exported_pod $labels.pod }}}} for {t['idle_window']} and its utilisation never "
            f"reached {_num(t['idle_util_percent'])} % in that time.",
            "Cause: a pod requested a GPU and does not use it (a notebook left open, a job waiting on input or "
            "stuck, a service with no traffic), which keeps the GPU from others. Fix: ask the pod's owner (its "
            "namespace) to release it: delete or scale down the pod, add an idle timeout to notebooks, or use a "
            "shared GPU (time-slicing, MPS, MIG) for light work. Queue quotas (Kueue) keep the waste bounded.",
        ),
    ]


_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def object_findings(name: Any, namespace: Any, labels: Any) -> list[Finding]:
    """The PrometheusRule's name (a DNS-1123 subdomain), namespace (a DNS-1123 label) and metadata labels (a mapping
    of strings) checked."""
    out: list[Finding] = []
    if not isinstance(name, str) or len(name) > 253 or not _SUBDOMAIN_RE.match(name):
        out.append(
            _finding(
                "gpu-alerts-rule-name-invalid",
                "",
                name,
                "The PrometheusRule's name must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', "
                "253 characters at most.",
                'Name it like "gpuops-gpu-alerts".',
                "name",
            )
        )
    if not isinstance(namespace, str) or len(namespace) > 63 or not _LABEL_RE.match(namespace):
        out.append(
            _finding(
                "gpu-alerts-rule-namespace-invalid",
                "",
                namespace,
                "The PrometheusRule's namespace must be a DNS-1123 label: lower-case letters, digits and '-', 63 "
                "characters at most.",
                "Give the namespace Prometheus reads rules from (its ruleNamespaceSelector).",
                "namespace",
            )
        )
    if labels is not None and (
        not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
    ):
        out.append(
            _finding(
                "gpu-alerts-rule-labels-invalid",
                "",
                labels,
                "The PrometheusRule's labels must be a mapping of strings to strings.",
                "Give the labels the Prometheus object's ruleSelector matches, as strings: "
                '{release: "kube-prometheus-stack"}.',
                "labels",
            )
        )
    return out


def rule_groups(thresholds: Mapping[str, Any] | None = None) -> list[dict]:
    """The alerting rules as Prometheus rule groups (the ``groups`` of a rules file and of a PrometheusRule's spec).
    ``thresholds`` overrides :data:`DEFAULT_THRESHOLDS`; ValueError when it is not valid."""
    t = merged_thresholds(thresholds)
    return [
        {"name": "gpuops-gpu-health", "rules": _health_rules(t)},
        {"name": "gpuops-gpu-capacity", "rules": _capacity_rules(t)},
    ]


def prometheus_rule(
    thresholds: Mapping[str, Any] | None,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
) -> dict:
    """The ``monitoring.coreos.com/v1`` PrometheusRule carrying :func:`rule_groups`; ``labels`` are its metadata
    labels (those the Prometheus object's ``ruleSelector`` wants)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {"groups": rule_groups(thresholds)},
    }

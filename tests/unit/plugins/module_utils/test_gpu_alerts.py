"""The GPU alert rules as tables: thresholds validation, every alert present with severity, for and annotations,
thresholds landing in the expressions, the metric names against dcgm-exporter's collectors CSV, the PrometheusRule
object and the filter (through Ansible too, where the rules' {{ $labels }} templates must survive untouched).
promtool evaluates the rules in tests/unit/alerts."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpuops.platform.plugins.filter.gpu_alert_rules import gpu_alert_rules
from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts as ga
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _gpu_alert_thresholds

REPO = Path(__file__).resolve().parents[4]

# NVIDIA/dcgm-exporter 4.5.3-4.8.2 etc/dcp-metrics-included.csv (what the GPU Operator runs): enabled lines ...
CSV_ENABLED = {
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DRIVER_VERSION",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
}  # fmt: skip
# ... and the lines it lists commented out that the rules may read
CSV_COMMENTED = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
}
# in neither file, but a field go-dcgm (ec245c09fe3e) maps by name, so a CSV line exports it
FIELD_NOT_IN_CSV = {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}

# alert -> (severity, the threshold key of its for)
ALERTS = {
    "GPUXidMemoryError": ("critical", "xid_for"),
    "GPUXidNVLinkError": ("critical", "xid_for"),
    "GPUXidFallenOffBus": ("critical", "xid_for"),
    "GPUXidHardwareError": ("critical", "xid_for"),
    "GPUXidApplicationError": ("warning", "xid_application_for"),
    "GPUUncorrectableECCError": ("critical", "ecc_for"),
    "GPURowRemapFailure": ("critical", "row_remap_failure_for"),
    "GPUFallenOffBus": ("critical", "fallen_off_bus_for"),
    "GPUThermalThrottling": ("warning", "thermal_for"),
    "GPUPowerThrottling": ("warning", "power_for"),
    "GPUNVLinkErrors": ("warning", "nvlink_for"),
    "GPUPCIeReplayStorm": ("warning", "pcie_for"),
    "GPUNodeAdvertisesFewerGPUs": ("warning", "missing_gpus_for"),
    "GPUExporterDown": ("warning", "exporter_down_for"),
    "GPUExporterAbsent": ("warning", "exporter_down_for"),
    "GPUAllocatedButIdle": ("warning", "idle_for"),
}
NODE_ALERTS = {"GPUNodeAdvertisesFewerGPUs", "GPUExporterDown", "GPUExporterAbsent"}


def rules(thresholds=None) -> dict[str, dict]:
    return {r["alert"]: r for g in ga.rule_groups(thresholds) for r in g["rules"]}


def ids(findings) -> list[str]:
    return [f["id"] for f in findings]


# --- thresholds ----------------------------------------------------------------------------------------------------


def test_defaults_are_valid_and_documented():
    assert ga.threshold_findings({}) == [] and ga.threshold_findings(None) == []
    assert ga.threshold_findings(dict(ga.DEFAULT_THRESHOLDS)) == []
    kinds = _gpu_alert_thresholds._KINDS
    assert list(kinds) == list(ga.DEFAULT_THRESHOLDS)  # every threshold has a kind to be checked against
    source = Path(_gpu_alert_thresholds.__file__).read_text()
    undocumented = [k for k in ga.DEFAULT_THRESHOLDS if not re.search(rf"^#   {k}\b|^#   .*\b{k}\b", source, re.M)]
    assert undocumented == []
    docs = (REPO / "docs/observability.md").read_text()
    assert [k for k in ga.DEFAULT_THRESHOLDS if f"`{k}`" not in docs] == []


@pytest.mark.parametrize(
    ("thresholds", "expected"),
    [
        ({"idle_util_percent": 10, "idle_window": "2h30m", "throttle_source": "clock_events"}, []),
        ({"xid_for": "0", "ecc_for": "0s", "gpu_temp_celsius": 82.5}, []),
        ({"power_watts_by_model": {"NVIDIA L40S": 350, "NVIDIA A100-SXM4-80GB": 400.0}}, []),
        ({"idle_util_percnt": 10}, ["gpu-alerts-threshold-unknown"]),
        ({"idle_util_percent": 0}, ["gpu-alerts-threshold-invalid"]),
        ({"idle_util_percent": 101}, ["gpu-alerts-threshold-invalid"]),
        ({"idle_util_percent": "5"}, ["gpu-alerts-threshold-invalid"]),
        ({"gpu_temp_celsius": True}, ["gpu-alerts-threshold-invalid"]),
        ({"gpu_temp_celsius": float("nan")}, ["gpu-alerts-threshold-invalid"]),
        ({"nvlink_errors_per_second": -1}, ["gpu-alerts-threshold-invalid"]),
        ({"power_watts": None}, ["gpu-alerts-threshold-invalid"]),
        ({"power_watts_by_model": [350]}, ["gpu-alerts-threshold-invalid"]),
        ({"power_watts_by_model": {"NVIDIA L40S": "350W", "": 300}}, ["gpu-alerts-threshold-invalid"] * 2),
        ({"xid_for": "5 minutes"}, ["gpu-alerts-duration-invalid"]),
        ({"xid_for": "1m1h"}, ["gpu-alerts-duration-invalid"]),
        ({"idle_for": 30}, ["gpu-alerts-duration-invalid"]),
        ({"nvlink_window": "0s"}, ["gpu-alerts-window-zero"]),
        ({"pcie_window": ""}, ["gpu-alerts-duration-invalid"]),
        ({"throttle_source": "clocks"}, ["gpu-alerts-throttle-source-invalid"]),
        ({"exporter_job": ""}, ["gpu-alerts-name-invalid"]),
        ({"exporter_job": 'dcgm"}'}, ["gpu-alerts-name-invalid"]),
        ({"exporter_container": "exporter"}, []),
        # a window that does not outlast its for: the alert could never fire
        ({"xid_application_window": "5m", "xid_application_for": "5m"}, ["gpu-alerts-window-shorter-than-for"]),
        ({"ecc_for": "2h"}, ["gpu-alerts-window-shorter-than-for"]),
        ({"fallen_off_bus_lookback": "3m"}, ["gpu-alerts-window-shorter-than-for"]),
        ([], ["gpu-alerts-thresholds-not-a-mapping"]),
    ],
)
def test_threshold_findings(thresholds, expected):
    findings = ga.threshold_findings(thresholds, "monitoring_gpu_alert_thresholds")
    assert ids(findings) == expected
    for f in findings:
        assert set(f) == {"id", "severity", "object", "evidence", "cause", "fix"}
        assert f["severity"] == "error" and f["object"]["kind"] == "variable"
        assert f["object"]["name"].startswith("monitoring_gpu_alert_thresholds")
        assert f["evidence"] and f["cause"] and f["fix"]


def test_unknown_key_suggests_the_close_one():
    (f,) = ga.threshold_findings({"gpu_temp_celcius": 80}, "v")
    assert "did you mean gpu_temp_celsius?" in f["cause"] and f["object"]["name"] == "v.gpu_temp_celcius"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0), ("0s", 0), ("90s", 90), ("1h30m", 5400), ("1d", 86400), ("500ms", 0.5), ("1w2d", 777600)],
)
def test_duration_seconds(text, seconds):
    assert ga.duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1", "m", "1.5h", "1m1h", "1H", " 1m", None, 60])
def test_duration_seconds_refuses(text):
    assert ga.duration_seconds(text) is None


def test_rule_groups_refuses_bad_thresholds():
    with pytest.raises(ValueError, match="idle_util_percent"):
        ga.rule_groups({"idle_util_percent": 0})


# --- the rules -----------------------------------------------------------------------------------------------------


def test_every_alert_once_in_order():
    names = [r["alert"] for g in ga.rule_groups() for r in g["rules"]]
    assert names == list(ga.ALERTS) == list(ALERTS)
    assert all(re.match(r"^GPU[A-Z][A-Za-z]+$", n) for n in names)
    assert [g["name"] for g in ga.rule_groups()] == ["gpuops-gpu-health", "gpuops-gpu-capacity"]


@pytest.mark.parametrize("alert", list(ALERTS))
def test_alert_has_severity_for_and_annotations(alert):
    severity, for_key = ALERTS[alert]
    rule = rules()[alert]
    assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}
    assert rule["labels"]["severity"] == severity
    assert rule["for"] == ga.DEFAULT_THRESHOLDS[for_key]
    ann = rule["annotations"]
    assert set(ann) == {"summary", "description", "runbook"}
    assert "Cause:" in ann["runbook"] and "Fix:" in ann["runbook"] and "{{" not in ann["runbook"]
    if alert in NODE_ALERTS:
        assert "$labels." in ann["description"] or alert == "GPUExporterAbsent"
    else:  # per GPU: the node and the GPU in the summary and the description
        for text in (ann["summary"], ann["description"]):
            assert "{{ $labels.Hostname }}" in text and "{{ $labels.gpu }}" in text


@pytest.mark.parametrize("alert", list(ALERTS))
def test_for_comes_from_the_thresholds(alert):
    _severity, for_key = ALERTS[alert]
    assert rules({for_key: "17m"})[alert]["for"] == "17m"


def test_xid_classes_split_severity():
    r = rules()
    for alert, xid_class in [
        ("GPUXidMemoryError", "memory"),
        ("GPUXidNVLinkError", "nvlink"),
        ("GPUXidFallenOffBus", "bus"),
        ("GPUXidHardwareError", "hardware"),
    ]:
        codes = "|".join(map(str, ga.XID_CLASSES[xid_class]))
        assert f'err_code=~"{codes}"' in r[alert]["expr"] and r[alert]["labels"]["xid_class"] == xid_class
    assert '"13|31|43|45"' in r["GPUXidApplicationError"]["expr"]
    assert ga.XID_CLASSES["bus"] == (79,) and {48, 63, 64, 94, 95} <= set(ga.XID_CLASSES["memory"])
    assert {119, 120} <= set(ga.XID_CLASSES["hardware"]) and 74 in ga.XID_CLASSES["nvlink"]
    every = [c for codes in ga.XID_CLASSES.values() for c in codes]
    assert len(every) == len(set(every)), "an XID in two classes"


@pytest.mark.parametrize(
    ("thresholds", "alert", "fragment"),
    [
        ({"gpu_temp_celsius": 80}, "GPUThermalThrottling", "(DCGM_FI_DEV_GPU_TEMP) >= 80"),
        ({"memory_temp_celsius": 90.5}, "GPUThermalThrottling", "(DCGM_FI_DEV_MEMORY_TEMP) >= 90.5"),
        ({"power_watts": 400}, "GPUPowerThrottling", "(DCGM_FI_DEV_POWER_USAGE) >= 400"),
        ({"nvlink_errors_per_second": 0.5}, "GPUNVLinkErrors", ") > 0.5"),
        ({"nvlink_window": "30m"}, "GPUNVLinkErrors", "rate(DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL[30m])"),
        ({"pcie_replays_per_second": 25}, "GPUPCIeReplayStorm", "rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[10m])) > 25"),
        ({"pcie_window": "1h"}, "GPUPCIeReplayStorm", "[1h]"),
        ({"ecc_window": "6h"}, "GPUUncorrectableECCError", "increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[6h])"),
        ({"ecc_window": "6h"}, "GPUUncorrectableECCError", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[6h])"),
        ({"fallen_off_bus_lookback": "2h"}, "GPUFallenOffBus", "last_over_time(DCGM_FI_DEV_GPU_TEMP[2h])"),
        ({"exporter_job": "dcgm-exporter"}, "GPUFallenOffBus", 'up{job="dcgm-exporter"} == 1'),
        ({"exporter_job": "dcgm-exporter"}, "GPUExporterDown", 'up{job="dcgm-exporter"} == 0'),
        ({"exporter_job": "dcgm-exporter"}, "GPUExporterAbsent", 'absent(up{job="dcgm-exporter"})'),
        ({"xid_application_window": "3h"}, "GPUXidApplicationError", "DCGM_FI_DEV_XID_ERRORS offset 3h"),
        ({"idle_util_percent": 12}, "GPUAllocatedButIdle", "[4h]) < 12 and"),
        ({"idle_window": "8h"}, "GPUAllocatedButIdle", '{exported_pod!=""}[8h]) < 5 and'),
        ({"idle_window": "8h"}, "GPUAllocatedButIdle", 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""} offset 8h'),
        ({"exporter_container": "exporter"}, "GPUAllocatedButIdle", 'container!="exporter"'),
    ],
)
def test_thresholds_land_in_the_expressions(thresholds, alert, fragment):
    assert fragment in rules(thresholds)[alert]["expr"]
    assert fragment not in rules()[alert]["expr"] or thresholds == {}


def test_thresholds_land_in_the_descriptions():
    r = rules({"idle_window": "8h", "idle_util_percent": 12, "nvlink_errors_per_second": 0.5, "ecc_window": "6h"})
    assert "for 8h" in r["GPUAllocatedButIdle"]["annotations"]["description"]
    assert "reached 12 %" in r["GPUAllocatedButIdle"]["annotations"]["description"]
    assert "above 0.5." in r["GPUNVLinkErrors"]["annotations"]["description"]
    assert "the last 6h." in r["GPUUncorrectableECCError"]["annotations"]["description"]


def test_power_per_model():
    expr = rules({"power_watts_by_model": {"NVIDIA L40S": 350, 'Odd "name"': 100}, "power_watts": 690})[
        "GPUPowerThrottling"
    ]["expr"]
    assert '(DCGM_FI_DEV_POWER_USAGE{modelName="NVIDIA L40S"}) >= 350' in expr
    assert r'(DCGM_FI_DEV_POWER_USAGE{modelName="Odd \"name\""}) >= 100' in expr
    assert r'(DCGM_FI_DEV_POWER_USAGE{modelName!="NVIDIA L40S", modelName!="Odd \"name\""}) >= 690' in expr


@pytest.mark.parametrize(
    ("alert", "bits"),
    [("GPUThermalThrottling", (0x20, 0x40)), ("GPUPowerThrottling", (0x80, 0x8))],
)
def test_clock_events_mode_reads_the_bitmask(alert, bits):
    expr = rules({"throttle_source": "clock_events"})[alert]["expr"]
    for bit in bits:
        assert f"floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / {bit}) % 2 == 1" in expr
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 4)" not in expr  # SW power cap: expected under full load
    assert "CLOCKS_EVENT_REASONS" not in rules()[alert]["expr"]


@pytest.mark.parametrize("mode", ["thresholds", "clock_events"])
def test_metrics_exist_in_the_exporter_csv(mode):
    """Every DCGM metric a rule reads is in dcgm-exporter's collectors CSV (enabled, or listed commented out), or a
    field the CSV can name; every one outside the enabled set is declared as a non-default counter of that alert."""
    extra = ga.non_default_counters({"throttle_source": mode})
    for alert, rule in rules({"throttle_source": mode}).items():
        used = set(re.findall(r"\bDCGM_[A-Z0-9_]+", rule["expr"]))
        assert used <= CSV_ENABLED | CSV_COMMENTED | FIELD_NOT_IN_CSV, alert
        assert used - CSV_ENABLED == set(extra.get(alert, ())), alert


def test_non_default_counters_by_mode():
    assert set(ga.non_default_counters()) == {"GPUUncorrectableECCError", "GPUNVLinkErrors"}
    ce = ga.non_default_counters({"throttle_source": "clock_events"})
    assert ce["GPUThermalThrottling"] == ce["GPUPowerThrottling"] == ["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]


def test_only_kube_state_metrics_and_up_besides_dcgm():
    names = set()
    for rule in rules().values():
        names |= set(re.findall(r"\b([a-z_][a-z0-9_]*)\{", rule["expr"]))
    assert names <= {"up", "kube_node_status_allocatable"}
    assert 'kube_node_status_allocatable{resource="nvidia_com_gpu"}' in rules()["GPUNodeAdvertisesFewerGPUs"]["expr"]


# --- the PrometheusRule, object findings, the filter ---------------------------------------------------------------


def test_prometheus_rule():
    obj = ga.prometheus_rule({"idle_window": "2h"}, "gpuops-gpu-alerts", "monitoring", {"release": "kps"})
    assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == "PrometheusRule"
    assert obj["metadata"] == {"name": "gpuops-gpu-alerts", "namespace": "monitoring", "labels": {"release": "kps"}}
    assert obj["spec"]["groups"] == ga.rule_groups({"idle_window": "2h"})


BAD_LABELS = "gpu-alerts-rule-labels-invalid"


@pytest.mark.parametrize(
    ("name", "namespace", "labels", "expected"),
    [
        ("gpuops-gpu-alerts", "monitoring", {"release": "kps"}, []),
        ("gpu.alerts", "monitoring", None, []),
        ("GPU_alerts", "monitoring", {}, ["gpu-alerts-rule-name-invalid"]),
        ("gpu-alerts", "Monitoring", {}, ["gpu-alerts-rule-namespace-invalid"]),
        ("gpu-alerts", "a" * 64, {}, ["gpu-alerts-rule-namespace-invalid"]),
        ("gpu-alerts", "monitoring", {"release": 1}, [BAD_LABELS]),
        (None, None, [], ["gpu-alerts-rule-name-invalid", "gpu-alerts-rule-namespace-invalid", BAD_LABELS]),
    ],
)
def test_object_findings(name, namespace, labels, expected):
    assert ids(ga.object_findings(name, namespace, labels)) == expected


def test_filter_builds_the_rule():
    out = gpu_alert_rules({"idle_util_percent": 10}, "gpu-alerts", "monitoring", {"release": "kps"})
    assert out["findings"] == []
    assert out["prometheus_rule"] == ga.prometheus_rule(
        {"idle_util_percent": 10}, "gpu-alerts", "monitoring", {"release": "kps"}
    )
    assert out["rules_file"] == {"groups": out["prometheus_rule"]["spec"]["groups"]}
    assert out["thresholds"] == {**ga.DEFAULT_THRESHOLDS, "idle_util_percent": 10}
    assert set(out["non_default_counters"]) == {"GPUUncorrectableECCError", "GPUNVLinkErrors"}
    assert gpu_alert_rules(None)["prometheus_rule"]["metadata"]["name"] == "gpuops-gpu-alerts"


def test_filter_reports_findings_and_builds_nothing():
    out = gpu_alert_rules({"idle_util_percnt": 10}, "Bad_Name", variable="monitoring_gpu_alert_thresholds")
    assert ids(out["findings"]) == ["gpu-alerts-threshold-unknown", "gpu-alerts-rule-name-invalid"]
    assert out["findings"][0]["object"]["name"] == "monitoring_gpu_alert_thresholds.idle_util_percnt"
    assert out["prometheus_rule"] is None and out["rules_file"] is None and out["thresholds"] is None


def test_filter_refuses_a_non_mapping():
    with pytest.raises(AnsibleFilterError, match="thresholds as a dict"):
        gpu_alert_rules(["idle_util_percent"])


def test_templates_survive_ansible(tmp_path):
    """Through a playbook, the {{ $labels.X }} templates of the annotations reach the object unrendered."""
    book = tmp_path / "play.yml"
    expr = "{{ {'idle_window': '2h'} | gpuops.platform.gpu_alert_rules('gpu-alerts', 'monitoring') }}"
    book.write_text(
        json.dumps(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {"ansible.builtin.set_fact": {"_r": expr}},
                        {"ansible.builtin.debug": {"var": "_r.prometheus_rule"}},
                    ],
                }
            ]
        )
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    r = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", str(book)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    tasks = json.loads(r.stdout)["plays"][0]["tasks"]
    got = tasks[1]["hosts"]["localhost"]["_r.prometheus_rule"]
    assert got == ga.prometheus_rule({"idle_window": "2h"}, "gpu-alerts", "monitoring")


# --- the exporter's collectors CSV -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("thresholds", "extra"),
    [
        ({}, ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", *(pair[1] for pair in ga.NVLINK_COUNTERS)]),
        (
            {"throttle_source": "clock_events"},
            [
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                *(pair[1] for pair in ga.NVLINK_COUNTERS),
                "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            ],
        ),
    ],
)
def test_collectors_csv_is_the_default_list_then_what_the_rules_read(thresholds, extra):
    csv = ga.collectors_csv(thresholds)
    fields = ga.collected_fields(csv)
    assert fields == [row[0] for row in ga.DEFAULT_COLLECTORS] + extra  # each once, in order
    assert set(fields[: len(ga.DEFAULT_COLLECTORS)]) == CSV_ENABLED
    for line in csv.splitlines():
        if line and not line.startswith("#"):
            field, kind, text = (part.strip() for part in line.split(",", 2))
            assert kind in ("gauge", "counter", "label") and text, line
    assert ga.missing_counters(thresholds, csv) == {}


def test_every_counter_the_rules_read_is_in_the_default_list_or_has_a_csv_line():
    default = {row[0] for row in ga.DEFAULT_COLLECTORS}
    for mode in ("thresholds", "clock_events"):
        for alert, rule in rules({"throttle_source": mode}).items():
            for name in set(re.findall(r"\bDCGM_[A-Z0-9_]+", rule["expr"])):
                assert name in default or name in ga.EXTRA_COLLECTORS, (alert, name)


DEFAULT_MISSING = {
    "GPUUncorrectableECCError": ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"],
    "GPUNVLinkErrors": [pair[1] for pair in ga.NVLINK_COUNTERS],
}


@pytest.mark.parametrize(
    ("csv", "missing"),
    [
        (None, DEFAULT_MISSING),
        ("", DEFAULT_MISSING),
        (
            "# a user's CSV\nDCGM_FI_DEV_GPU_TEMP, gauge, t\n# DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, commented out\n"
            + "".join(f"{pair[1]}, counter, x\n" for pair in ga.NVLINK_COUNTERS),
            {"GPUUncorrectableECCError": ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]},
        ),
    ],
    ids=["no-csv", "empty-csv", "user-csv"],
)
def test_missing_counters(csv, missing):
    assert ga.missing_counters({}, csv) == missing

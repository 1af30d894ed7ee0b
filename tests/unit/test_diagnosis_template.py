"""playbooks/templates/diagnosis.txt.j2: the readiness table with and without the FIRING GPU ALERTS column (from
Prometheus's ALERTS series, as prometheus_query's gpu_overview returns them), aligned, and the line that says why
the column is missing when Prometheus does not answer."""

from __future__ import annotations

from pathlib import Path

import jinja2
from ansible_collections.gpuops.platform.plugins.module_utils import _monitoring

TEMPLATE = Path(__file__).resolve().parents[2] / "playbooks/templates/diagnosis.txt.j2"
DIAG = {
    "nodes": [
        {
            "name": "dgx-h100-0",
            "vendor": "nvidia",
            "product": "NVIDIA-H100-80GB-HBM3",
            "ready": True,
            "gpus": 8,
            "sharing": {"summary": "exclusive: nvidia.com/gpu=8"},
            "operands": [],
        },
        {
            "name": "pcie-l40s-0",
            "vendor": "nvidia",
            "product": "NVIDIA-L40S",
            "ready": True,
            "gpus": 4,
            "sharing": {"summary": "exclusive: nvidia.com/gpu=4"},
            "operands": [{"component": "dcgm-exporter", "ready": False}],
        },
    ],
    "diagnosis": [],
}


def render(**variables):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    return env.from_string(TEMPLATE.read_text()).render(gpuops_diagnosis=DIAG, **variables)


def test_without_monitoring_no_column():
    text = render()
    assert "FIRING GPU ALERTS" not in text and "REPORTING" not in text
    assert text.splitlines()[0].split()[-4:] == ["SHARING", "OPERANDS", "NOT", "READY"]


def test_the_column_lists_each_nodes_firing_alerts_aligned():
    firing = [
        {
            "metric": {"alertname": "GPUXidFallenOffBus", "alertstate": "firing", "Hostname": "dgx-h100-0", "gpu": "3"},
            "value": [0, "1"],
        }
    ]
    reporting = [{"metric": {"Hostname": "dgx-h100-0"}, "value": [0, "7"]}]
    overview = _monitoring.metrics_by_node(firing, reporting)  # what prometheus_query's gpu_overview returns
    text = render(_diagnose_prometheus={"reachable": True, "gpu_overview": overview})
    head, first, second = text.splitlines()[:3]
    assert head.endswith("FIRING GPU ALERTS")
    assert first.endswith("GPUXidFallenOffBus(gpu 3)") and second.endswith(" -")
    col = head.index("FIRING GPU ALERTS")
    assert first.index("GPUXidFallenOffBus") == col and second.rstrip().endswith("-")
    assert second.index("dcgm-exporter") < col
    rep = head.index("REPORTING")
    assert first[rep:].startswith("7 GPUs") and second[rep:].startswith("0 GPUs")


def test_an_unreachable_prometheus_is_said():
    text = render(
        _diagnose_prometheus={"reachable": False, "results": {}, "error": "Prometheus at http://x cannot be reached"}
    )
    assert "FIRING GPU ALERTS" not in text.splitlines()[0]
    assert "No REPORTING and FIRING GPU ALERTS columns (Prometheus): Prometheus at http://x cannot be reached" in text

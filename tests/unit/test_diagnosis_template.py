"""playbooks/templates/diagnosis.txt.j2: the readiness table with and without the FIRING GPU ALERTS column (from
Prometheus's ALERTS series, as prometheus_query's gpu_overview returns them), aligned, and the line that says why
the column is missing when Prometheus does not answer."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml
from ansible_collections.gpuops.platform.plugins.filter.aligned_columns import FilterModule as AlignedColumns
from ansible_collections.gpuops.platform.plugins.filter.quarantined_nodes import FilterModule as QuarantinedNodes
from ansible_collections.gpuops.platform.plugins.module_utils.monitoring import _monitoring

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
            "scheduling": {"summary": "schedulable"},
            "operands": [],
        },
        {
            "name": "pcie-l40s-0",
            "vendor": "nvidia",
            "product": "NVIDIA-L40S",
            "ready": True,
            "gpus": 4,
            "sharing": {"summary": "exclusive: nvidia.com/gpu=4"},
            "scheduling": {"summary": "cordoned (onboarding)"},
            "operands": [{"component": "dcgm-exporter", "ready": False}],
        },
    ],
    "diagnosis": [],
}


def render(diagnosis=None, **variables):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    for plugin in (AlignedColumns(), QuarantinedNodes()):
        env.filters.update({f"gpuops.platform.{k}": v for k, v in plugin.filters().items()})
    return env.from_string(TEMPLATE.read_text()).render(gpuops_diagnosis=diagnosis or DIAG, **variables)


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


def _columns(head, line, names):
    """Each column's cell in ``line``, cut where the header's next column starts."""
    starts = [head.index(n) for n in names]
    return [line[a:b].rstrip() for a, b in zip(starts, [*starts[1:], None], strict=True)]


LONG_NODE = "gpu-worker-pool-a-h100-sxm5-rack12-u0042"  # 40 characters
LONG_PRODUCT = "NVIDIA-GH200-480GB-Grace-Hopper-Superchip-MIG-1g.12gb"


def test_columns_fit_their_content():
    """A 40-character node name and a product longer than 28 characters: every cell starts under its header,
    nothing is cut, and the columns are as wide as their longest cell (two spaces between them)."""
    long = {
        **DIAG["nodes"][0],
        "name": LONG_NODE,
        "product": LONG_PRODUCT,
        "scheduling": {"summary": "cordoned, tainted dedicated=ml:NoSchedule"},
    }
    text = render({"nodes": [DIAG["nodes"][1], long], "diagnosis": []})
    head, *rows = text.splitlines()[:3]
    names = ["NODE", "VENDOR", "PRODUCT", "READY", "SCHEDULING", "GPUS", "SHARING", "OPERANDS NOT READY"]
    assert _columns(head, head, names) == names
    assert _columns(head, rows[0], names) == [
        "pcie-l40s-0",
        "nvidia",
        "NVIDIA-L40S",
        "True",
        "cordoned (onboarding)",
        "4",
        "exclusive: nvidia.com/gpu=4",
        "dcgm-exporter",
    ]
    assert _columns(head, rows[1], names) == [
        LONG_NODE,
        "nvidia",
        LONG_PRODUCT,
        "True",
        "cordoned, tainted dedicated=ml:NoSchedule",
        "8",
        "exclusive: nvidia.com/gpu=8",
        "-",
    ]
    assert (
        head.index("VENDOR") == len(LONG_NODE) + 2
        and head.index("READY") == head.index("PRODUCT") + len(LONG_PRODUCT) + 2
    )


def test_queues_fit_their_content():
    flavor = "nvidia-gh200-480gb-grace-hopper-superchip"  # longer than the 30 characters once cut at
    queue = {
        "cluster_queue": "research-team-with-a-long-name",
        "cohort": None,
        "flavor": flavor,
        "resource": "nvidia.com/gpu",
        "nominal": "8",
        "borrowing_limit": None,
        "lending_limit": None,
        "used": "2",
        "borrowed": "0",
        "admitted": 1,
        "pending": 0,
    }
    text = render({**DIAG, "queues": [queue]})
    lines = text.splitlines()
    head = lines[lines.index("QUEUES (Kueue)") + 1]
    row = lines[lines.index("QUEUES (Kueue)") + 2]
    names = ["CLUSTERQUEUE", "COHORT", "FLAVOR", "RESOURCE", "QUOTA", "USED", "ADMIT", "PENDING"]
    assert _columns(head, row, names) == [queue["cluster_queue"], "-", flavor, "nvidia.com/gpu", "8", "2", "1", "0"]


def _tasks(playbook):
    plays = yaml.safe_load((TEMPLATE.parents[1] / playbook).read_text())
    out = []

    def walk(tasks):
        for task in tasks or ():
            out.append(task)
            walk(task.get("block"))

    for play in plays:
        walk(play.get("tasks"))
    return out


def _status_feeding_the_table(playbook):
    """The gpu_cluster_status task whose result the playbook prints with this template, and the task index of the
    print."""
    tasks = _tasks(playbook)
    (printed,) = [i for i, t in enumerate(tasks) if "diagnosis.txt.j2" in str(t.get("gpuops.platform.report"))]
    var = str((tasks[printed].get("vars") or {}).get("gpuops_diagnosis") or "gpuops_diagnosis").strip("{} ")
    (status,) = [
        i for i, t in enumerate(tasks) if "gpuops.platform.gpu_cluster_status" in t and t.get("register") == var
    ]
    return tasks, status, printed


def test_the_onboarded_nodes_row_is_read_as_diagnose_reads_it():
    """onboard_node.yml prints the node's row with the SHARING (and SCHEDULING) diagnose.yml shows: its status is
    read with sharing, after the uncordon (so the row does not show the cordon onboarding just lifted)."""
    diag = _status_feeding_the_table("diagnose.yml")[1]
    tasks, status, printed = _status_feeding_the_table("onboard_node.yml")
    assert _tasks("diagnose.yml")[diag]["gpuops.platform.gpu_cluster_status"]["sharing"] is True
    assert tasks[status]["gpuops.platform.gpu_cluster_status"].get("sharing") is True
    (uncordon,) = [
        i for i, t in enumerate(tasks) if (t.get("kubernetes.core.k8s_drain") or {}).get("state") == "uncordon"
    ]
    assert uncordon < status < printed


QUARANTINED_NODE = {
    "metadata": {
        "name": "dgx-h100-1",
        "labels": {"gpuops.platform/remediation": "quarantined"},
        "annotations": {
            "gpuops.platform/remediation.alert": "GPUXidFallenOffBus",
            "gpuops.platform/remediation.fault-class": "bus",
            "gpuops.platform/remediation.gpu-index": "3",
            "gpuops.platform/remediation.gpu-uuid": "GPU-5c6f1a2b-0000",
            "gpuops.platform/remediation.fault-since": "2026-11-28T08:00:00Z",
            "gpuops.platform/remediation.at": "2026-11-28T08:00:20Z",
        },
    },
    "spec": {"unschedulable": True},
}


def test_the_quarantined_nodes_and_why():
    objects = {"marked": {"resources": [QUARANTINED_NODE]}, "breaker": {"resources": []}}
    text = render(_diagnose_remediation={"objects": objects})
    table = text.split("QUARANTINED (gpuops remediation)\n", 1)[1].splitlines()
    assert table[0].split()[:3] == ["NODE", "STATE", "CORDONED"]
    assert table[1].split() == [
        "dgx-h100-1",
        "quarantined",
        "True",
        "GPUXidFallenOffBus",
        "bus",
        "GPU",
        "3",
        "(GPU-5c6f1a2b-0000)",
        "2026-11-28T08:00:00Z",
        "2026-11-28T08:00:20Z",
    ]
    assert "CIRCUIT BREAKER OPEN" not in text


def test_an_open_breaker_is_said_with_how_to_close_it():
    breaker = {"data": {"status": "TRIPPED", "reason": "2 of 64 GPU nodes are quarantined already"}}
    text = render(_diagnose_remediation={"objects": {"marked": {"resources": []}, "breaker": {"resources": [breaker]}}})
    assert "QUARANTINED" not in text
    assert "CIRCUIT BREAKER OPEN" in text and "2 of 64 GPU nodes" in text and '"status":"CLOSED"' in text


def test_no_remediation_read_no_table():
    assert "QUARANTINED" not in render() and "CIRCUIT BREAKER" not in render()

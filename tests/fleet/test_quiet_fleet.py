"""A quiet fleet: 64 simulated DGX H100 GPU nodes watched for 10 minutes by the whole event pipeline - the lab's real
Prometheus (the collection's GPU alert rules, module_utils/_gpu_alerts.py) scraping the simulated dcgm-exporters of
the GPU Operator the simulator plays, the real Alertmanager routing the GPU alerts to the rulebook's webhook, the real
ansible-rulebook running extensions/eda/rulebooks/gpu_health.yml (gpuops_lab.eda: its remediation playbook is a stub
that records every run) - and the API server:

- the healthy nodes: no remediation run at all, no alert firing for them at the end;
- application XIDs (13, 31, 43: the "application" XID class) on three nodes: their alert fires and reaches the
  rulebook, which only logs it (fault policy action none): no run, no quarantine;
- thermal and power throttling on two nodes: their alerts fire and the rulebook runs the remediation playbook with
  exactly the action the fault policy gives them (module_utils/_fault_policy.py: label), never quarantine;
- no node cordoned during the whole window;
- the positive control, at the end: an XID 79 on one healthy node brings a quarantine run for that node and GPU and
  nothing else, so a dead pipeline (Prometheus, Alertmanager, the rulebook) fails this test instead of passing it
  quietly. (The stub keeps the last run per alert and node; the source's deduplication is the bad-input tests'.)

Every ``for`` of the rules is shortened to FOR (the rules' defaults are minutes to half an hour), so that every alert a
healthy fleet could raise by mistake has the time to fire within the window, and the throttling alerts fire in it.
The rulebook runs in its default mode (dry_run): what is counted is what it asks the playbook to do.

`make test` runs this file on a lab of its own (hack/run-tests.sh, stage quiet-fleet) beside lint and sanity;
GPUOPS_QUIET_SECONDS shortens the window for a trial run (the default, 600, is what the claim is about)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from gpuops_lab import dcgm, eda, monitoring, node_exporter
from gpuops_lab.k8s import wait_for
from gpuops_lab.testing import gpu_alerting

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".state" / "collections"))

from ansible_collections.gpuops.platform.plugins.module_utils import _fault_policy as fp  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts as ga  # noqa: E402

FLEET = 64
QUIET = float(os.environ.get("GPUOPS_QUIET_SECONDS", "600"))
FOR = "10s"
# every `for` short; an application XID alerts for 2 minutes after it appears (then resolves, in the window)
THRESHOLDS = {
    **{k: FOR for k in ga.DEFAULT_THRESHOLDS if k.endswith("_for")},
    "xid_application_window": "2m",
}
# a scrape and an evaluation before the `for` starts, one evaluation after it, the group wait, slack for 2 cores
FIRE_WITHIN = 10 + 5 + 5 + 5 + 1 + 30
APP_XIDS = (13, 31, 43)
THROTTLING = {"thermal": "GPUThermalThrottling", "power-brake": "GPUPowerThrottling"}


def _notifications(cfg) -> float:
    """Alertmanager's webhook notifications sent so far (its own counter)."""
    url = f"{monitoring.alertmanager_url(cfg)}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - loopback
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("alertmanager_notifications_total{") and 'integration="webhook"' in line
    )


def _cpu(cluster, nodes: list[str], rulebook: eda.Rulebook) -> dict[str, float]:
    """CPU seconds used so far by each lab daemon (control plane, simulator, monitoring), the node_exporters together,
    and ansible-rulebook (its JVM runs in its process; its playbook runs, waited for, count in it too)."""
    used = dict(cluster.lab.cpu())
    used["node_exporter"] = sum(node_exporter.proc(cluster.cfg, n).cpu_seconds() or 0.0 for n in nodes)
    fields = Path(f"/proc/{rulebook.proc.pid}/stat").read_text().rsplit(")", 1)[-1].split()
    used["ansible-rulebook"] = sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return used


@contextlib.contextmanager
def rulebook_stopped(rulebook: eda.Rulebook) -> Iterator[None]:
    try:
        yield
    finally:
        rulebook.stop()


def test_a_quiet_fleet_gets_no_action(cluster, tmp_path):
    assert all(xid in ga.XID_CLASSES["application"] for xid in APP_XIDS)
    policies = fp.alert_policies()
    assert {policies[a]["action"] for a in THROTTLING.values()} == {"label"}, policies  # what is asserted below
    # the rulebook first: its JVM starts slowly on a busy machine, and Alertmanager sends to it from the start
    rulebook = eda.start(tmp_path / "eda", monitoring.port(cluster.cfg, "eda-webhook"), timeout=300)
    with rulebook_stopped(rulebook), gpu_alerting(cluster, (("dgx-h100", FLEET),), THRESHOLDS) as fleet:
        cfg, core, nodes = fleet.cfg, fleet.core, fleet.nodes
        assert len(nodes) == FLEET
        app = dict(zip(nodes[1:4], APP_XIDS, strict=True))  # node -> XID
        throttled = dict(zip(nodes[4:6], THROTTLING, strict=True))  # node -> preset
        control = nodes[-1]
        faulted = set(app) | set(throttled)
        healthy = [n for n in nodes if n not in faulted]
        t0 = time.monotonic()
        sent0 = _notifications(cfg)
        cpu0 = _cpu(cluster, nodes, rulebook)
        for i, (node, xid) in enumerate(app.items()):
            dcgm.inject(cfg.state, node, i, {"xid": xid})
        for i, (node, preset) in enumerate(throttled.items()):
            dcgm.inject(cfg.state, node, 4 + i, dcgm.PRESETS[preset])

        def cordoned() -> list[str]:
            return [
                n.metadata.name for n in core.list_node().items if n.spec.unschedulable and n.metadata.name in nodes
            ]

        quarantines: list = []
        while time.monotonic() - t0 < QUIET:
            records = rulebook.recorded()
            quarantines = [k for k, r in records.items() if r["event"]["action"] == "quarantine"]
            assert quarantines == [] and cordoned() == [], (quarantines, cordoned())
            if time.monotonic() - t0 > QUIET / 2:  # the throttling ends halfway: its alerts resolve
                for node in throttled:
                    dcgm.clear(cfg.state, node)
            time.sleep(10)

        cpu = _cpu(cluster, nodes, rulebook)
        spent = {k: v - cpu0.get(k, 0.0) for k, v in cpu.items()}
        total = sum(spent.values())
        top = ", ".join(f"{k} {v:.1f}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1]) if v >= 0.05)
        window = time.monotonic() - t0
        print(
            f"quiet fleet CPU seconds over {window:.0f}s: {total:.1f} ({100 * total / window:.0f} % of one core; "
            f"{top})",
            file=sys.stderr,
        )
        # throttling: the playbook asked to label the node, nothing more (the last run: its resolution)
        expected = {(alert, node) for node, alert in ((n, THROTTLING[p]) for n, p in throttled.items())}

        def settled() -> dict | None:
            got = rulebook.recorded()
            done = set(got) >= expected and all(got[k]["event"]["status"] == "resolved" for k in expected)
            return got if done else None

        records = wait_for(settled, FIRE_WITHIN + 60, 1.0) or rulebook.recorded()
        log = rulebook.log.read_text()
        # the application XIDs reached the rulebook, which only logged them
        for node in app:
            assert f"GPUXidApplicationError firing on {node}: no action" in log, log[-3000:]
        assert set(records) == expected, records
        for (alert, node), rec in records.items():
            ev = rec["event"]
            assert (ev["node"], ev["alert"], ev["action"]) == (node, alert, policies[alert]["action"]), rec
            assert ev["status"] == "resolved", rec  # the last run: the throttling ended
        assert cordoned() == []
        firing = [
            a["labels"]
            for a in monitoring.alerts(cfg)
            if a["state"] == "firing" and a["labels"].get("Hostname") in healthy
        ]
        assert firing == [], firing
        sent = _notifications(cfg) - sent0
        assert sent >= len(app) + 2 * len(throttled), sent  # each fired, throttling also resolved

        # the positive control: one fatal fault on a healthy node brings one quarantine run, for it only
        dcgm.inject(cfg.state, control, 2, dcgm.PRESETS["xid79"])
        key = ("GPUXidFallenOffBus", control)
        assert wait_for(lambda: key in rulebook.recorded(), FIRE_WITHIN + 30, 0.5), (
            f"no remediation run for {key}: the pipeline is not working; Alertmanager "
            f"{monitoring.alertmanager_alerts(cfg)}; rulebook log {rulebook.log.read_text()[-3000:]}"
        )
        time.sleep(10)  # a second run for it (or any other) would show now
        records = rulebook.recorded()
        assert set(records) == expected | {key}, records
        ev = records[key]["event"]
        assert (ev["action"], ev["status"], ev["gpu"]["index"]) == ("quarantine", "firing", 2), ev
        print(
            f"quiet fleet: {FLEET} nodes for {QUIET:.0f}s, {sent:.0f} Alertmanager webhook notifications, "
            f"{len(records)} remediation runs recorded (throttling labels and the control)",
            file=sys.stderr,
        )

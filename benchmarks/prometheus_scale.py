"""Benchmark of the lab's monitoring at fleet scale (issue 11): the real Prometheus 3.5.0 scraping N simulated
dcgm-exporters (default 128 nodes x 8 GPUs = 1024 GPUs, hardware profile dgx-h100) every 5 s with the collection's
GPU alert rules loaded (module_utils/_gpu_alerts.py rules_file, default thresholds) and evaluated every 5 s.

The exporter (hack/gpuops_lab/dcgm.py, the lab's one process for every node) serves synthetic nodes: no kube Node,
pod or ServiceMonitor backs them (128 kwok nodes and their operand pods would measure the API server, not the
monitoring), so the targets are written the way monitoring.sync writes them for the GPU Operator's ServiceMonitor
(job nvidia-dcgm-exporter, namespace, service, pod, container, endpoint, instance). No kube-state-metrics runs: the
GPUNodeAdvertisesFewerGPUs rule's right-hand side is empty. A few GPUs carry faults (XID 79, a row-remap failure, a
hot GPU) so that alerting rules match something.

Measured after --duration seconds (default 120): the scrape duration of every target (scrape_duration_seconds over
the window: median and p99 of all scrapes, and the worst), samples per scrape, the head series, each rule group's
evaluation time (prometheus_rule_group_last_duration_seconds over the window: median and max) and the slowest
rules' last evaluation, the resident memory
(VmRSS now, VmHWM peak) and CPU use of the exporter and of Prometheus. No lab is needed; everything runs on loopback
in a temporary directory and is stopped afterwards.
Usage: PYTHONPATH=hack .venv/bin/python benchmarks/prometheus_scale.py [--nodes 128] [--duration 120]
Writes benchmarks/results/prometheus-<UTC date>.json and prints it."""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from gpuops_lab import dcgm, monitoring, profiles
from gpuops_lab.config import HACK, REPO, LabConfig

sys.path.insert(0, str(REPO / ".state" / "collections"))
from ansible_collections.gpuops.platform.plugins.module_utils import _gpu_alerts as ga  # noqa: E402

PROFILE = "dgx-h100"
FAULTS = {
    0: {"3": dcgm.PRESETS["xid79"]},
    1: {"0": dcgm.PRESETS["row-remap-failure"]},
    2: {"5": dcgm.PRESETS["thermal"]},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - loopback
        return r.read()


def query(base: str, expr: str) -> list[dict]:
    return json.loads(get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))["data"]["result"]


def scalar(base: str, expr: str) -> float | None:
    got = query(base, expr)
    return round(float(got[0]["value"][1]), 6) if got else None


def proc_stats(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    kb = {
        line.split(":")[0]: int(line.split()[1]) for line in status.splitlines() if line.startswith(("VmRSS", "VmHWM"))
    }
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return {"rss_mib": round(kb["VmRSS"] / 1024, 1), "peak_rss_mib": round(kb["VmHWM"] / 1024, 1), "cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of scraping measured (after a warm-up)")
    ap.add_argument("--warmup", type=float, default=20.0)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the exporter and Prometheus (finally) on kill
    cfg = LabConfig.load()
    load_before = [round(x, 2) for x in os.getloadavg()]
    prom_bin = monitoring.binary(cfg, "prometheus")
    if not prom_bin.is_file():
        raise SystemExit(f"no Prometheus at {prom_bin}: run hack/cluster/build.sh prometheus")
    with tempfile.TemporaryDirectory(prefix="gpuops-prom-bench-") as tmp:
        d = Path(tmp)
        state = d / "monitoring"
        nodes = [f"bench-{PROFILE}-{i:03d}" for i in range(args.nodes)]
        dcgm.write_nodes(d, {n: {"profile": PROFILE, "driver_version": "580.126.20"} for n in nodes})
        dcgm.write_collectors(d, None)
        for i, gpus in FAULTS.items():
            for gpu, fault in gpus.items():
                dcgm.inject(d, nodes[i], int(gpu), fault)
        exp_port, prom_port = free_port(), free_port()
        targets = [
            {
                "targets": [f"127.0.0.1:{exp_port}"],
                "labels": {
                    "__metrics_path__": f"/node/{n}/metrics",
                    "job": "nvidia-dcgm-exporter",
                    "namespace": "gpu-operator",
                    "service": "nvidia-dcgm-exporter",
                    "pod": f"nvidia-dcgm-exporter-{i:05x}",
                    "container": "nvidia-dcgm-exporter",
                    "endpoint": "gpu-metrics",
                    "instance": f"10.244.{i // 250}.{i % 250 + 2}:9400",
                },
            }
            for i, n in enumerate(nodes)
        ]
        (state / "sd").mkdir(parents=True)
        (state / "rules").mkdir()
        (state / "sd" / "dcgm.json").write_text(json.dumps(targets))
        (state / "rules" / "gpu-alerts.yaml").write_text(yaml.safe_dump({"groups": ga.rule_groups({})}))
        prom_cfg = {
            "global": {
                "scrape_interval": monitoring.SCRAPE_INTERVAL,
                "evaluation_interval": monitoring.EVALUATION_INTERVAL,
                "scrape_timeout": monitoring.SCRAPE_TIMEOUT,
            },
            "rule_files": [str(state / "rules" / "*.yaml")],
            "scrape_configs": [
                {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{prom_port}"]}]},
                {
                    "job_name": "serviceMonitor/gpu-operator/nvidia-dcgm-exporter/0",
                    "honor_labels": False,
                    "file_sd_configs": [{"files": [str(state / "sd" / "dcgm.json")]}],
                },
            ],
        }
        (state / "prometheus.yml").write_text(yaml.safe_dump(prom_cfg, sort_keys=False))
        env = {**os.environ, "PYTHONPATH": str(HACK)}
        logs = open(d / "logs.txt", "wb")  # noqa: SIM115 - closed in finally
        exporter = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "gpuops_lab.dcgm", "--port", str(exp_port), "--state", str(state)],
            env=env,
            stdout=logs,
            stderr=subprocess.STDOUT,
        )
        prom = subprocess.Popen(  # noqa: S603
            [
                str(prom_bin),
                f"--config.file={state / 'prometheus.yml'}",
                f"--storage.tsdb.path={state / 'tsdb'}",
                f"--storage.tsdb.retention.time={monitoring.RETENTION}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--log.level=warn",
            ],
            stdout=logs,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{prom_port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    get(f"{base}/-/ready")
                    get(f"http://127.0.0.1:{exp_port}/healthz")
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"Prometheus or the exporter did not start; see {d / 'logs.txt'}") from None
                    time.sleep(0.3)
            t_one = time.monotonic()
            body = get(f"http://127.0.0.1:{exp_port}/node/{nodes[5]}/metrics")
            render_ms = (time.monotonic() - t_one) * 1000
            time.sleep(args.warmup)
            before = {"exporter": proc_stats(exporter.pid), "prometheus": proc_stats(prom.pid)}
            time.sleep(args.duration)
            after = {"exporter": proc_stats(exporter.pid), "prometheus": proc_stats(prom.pid)}
            w = f"{int(args.duration)}s"
            sel = 'job="nvidia-dcgm-exporter"'
            up = scalar(base, f"sum(up{{{sel}}})")
            groups = {}
            for g in ("gpuops-gpu-health", "gpuops-gpu-capacity"):
                gs = f'rule_group=~".*;{g}"'
                groups[g] = {
                    "rules": len(next(x["rules"] for x in ga.rule_groups({}) if x["name"] == g)),
                    "eval_median_ms": round(
                        1000
                        * scalar(
                            base,
                            f"max(quantile_over_time(0.5, prometheus_rule_group_last_duration_seconds{{{gs}}}[{w}]))",
                        ),
                        2,
                    ),
                    "eval_max_ms": round(
                        1000
                        * scalar(base, f"max(max_over_time(prometheus_rule_group_last_duration_seconds{{{gs}}}[{w}]))"),
                        2,
                    ),
                }
            rules = [
                (r["name"], round(1000 * r["evaluationTime"], 2))
                for g in json.loads(get(f"{base}/api/v1/rules"))["data"]["groups"]
                for r in g["rules"]
            ]
            slowest = sorted(rules, key=lambda x: -x[1])[:4]
            firing = sorted(
                {
                    (a["labels"]["alertname"], a["labels"].get("Hostname", ""), a["labels"].get("gpu", ""))
                    for a in json.loads(get(f"{base}/api/v1/alerts"))["data"]["alerts"]
                    if a["state"] == "firing"
                }
            )
            result = {
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                "load_average_before": load_before,
                "prometheus": cfg.versions["PROMETHEUS_VERSION"],
                "nodes": args.nodes,
                "gpus": args.nodes * len(dcgm.gpus_of(nodes[0], profiles.load(PROFILE))),
                "scrape_interval": monitoring.SCRAPE_INTERVAL,
                "evaluation_interval": monitoring.EVALUATION_INTERVAL,
                "window_s": args.duration,
                "targets_up": up,
                "one_scrape_bytes": len(body),
                "one_scrape_ms_idle": round(render_ms, 1),
                "samples_per_scrape": scalar(base, f"max(scrape_samples_scraped{{{sel}}})"),
                "head_series": scalar(base, "prometheus_tsdb_head_series"),
                "scrape_duration_ms": {
                    "median": round(
                        1000
                        * scalar(
                            base, f"quantile(0.5, quantile_over_time(0.5, scrape_duration_seconds{{{sel}}}[{w}]))"
                        ),
                        1,
                    ),
                    "p99": round(
                        1000
                        * scalar(
                            base, f"quantile(0.99, quantile_over_time(0.99, scrape_duration_seconds{{{sel}}}[{w}]))"
                        ),
                        1,
                    ),
                    "max": round(1000 * scalar(base, f"max(max_over_time(scrape_duration_seconds{{{sel}}}[{w}]))"), 1),
                },
                "rule_groups": groups,
                "slowest_rules_last_eval_ms": [list(r) for r in slowest],
                "firing": [list(a) for a in firing],
                "memory_mib": {
                    k: {"rss": after[k]["rss_mib"], "peak_rss": after[k]["peak_rss_mib"]}
                    for k in ("exporter", "prometheus")
                },
                "cpu_cores": {
                    k: round((after[k]["cpu_s"] - before[k]["cpu_s"]) / args.duration, 3)
                    for k in ("exporter", "prometheus")
                },
            }
        finally:
            for p in (prom, exporter):
                p.terminate()
            for p in (prom, exporter):
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
            logs.close()
    out = REPO / "benchmarks" / "results" / f"prometheus-{time.strftime('%Y%m%d', time.gmtime())}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""Benchmarks of the batch layer (issue 10) on the lab, with its real Kueue v0.19.2 controller:

1. admission latency of N queued Jobs (default 1000) through Kueue: one ClusterQueue with quota for all of them (CPU,
   a flavor without node labels), the Jobs created as fast as the client can (1 pod each, 10m CPU); per Job, the
   time from its creation call returning to the moment a watch on Workloads sees it Admitted. Reports p50/p90/p99 and
   throughput (admitted Jobs per second from the first creation to the last admission).
2. the kueue role's converge for T teams (default 50: one namespace, one LocalQueue and one ClusterQueue each, in one
   cohort), then the idempotent re-run, each timed as a whole ansible-playbook process.

The lab must be up with the inventory nodes (`python -m gpuops_lab up --inventory-nodes`: the release's controller pod
needs a worker node); everything made is deleted afterwards.
Usage: PYTHONPATH=hack .venv/bin/python benchmarks/kueue.py [--jobs 1000] [--teams 50]
Writes benchmarks/results/kueue-<UTC date>.json and prints it."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from gpuops_lab.config import REPO, LabConfig
from gpuops_lab.k8s import wait_for
from kubernetes import client, config, watch

API = ("kueue.x-k8s.io", "v1beta2")
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def admission(api, n: int, workers: int) -> dict:
    core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
    ns, name = "bench-kueue", "bench-admission"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    custom.create_cluster_custom_object(
        *API, "resourceflavors", {"apiVersion": "/".join(API), "kind": "ResourceFlavor", "metadata": {"name": name}}
    )
    rg = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": name, "resources": [{"name": "cpu", "nominalQuota": str(n)}]}],
        }
    ]
    cq = {
        "apiVersion": "/".join(API),
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": rg},
    }
    custom.create_cluster_custom_object(*API, "clusterqueues", cq)
    lq = {"apiVersion": "/".join(API), "kind": "LocalQueue", "metadata": {"name": "q"}, "spec": {"clusterQueue": name}}
    custom.create_namespaced_custom_object(*API, ns, "localqueues", lq)
    wait_for(lambda: custom.list_namespaced_custom_object(*API, ns, "localqueues")["items"][0].get("status"), 30)
    admitted: dict[str, float] = {}
    stop = threading.Event()

    def watcher():
        w = watch.Watch()
        while not stop.is_set():
            for ev in w.stream(custom.list_namespaced_custom_object, *API, ns, "workloads", timeout_seconds=5):
                obj = ev["object"]
                conds = (obj.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Admitted" and c["status"] == "True" for c in conds):
                    job = (obj["metadata"].get("ownerReferences") or [{}])[0].get("name")
                    admitted.setdefault(job, time.monotonic())
                if stop.is_set():
                    break

    t = threading.Thread(target=watcher, daemon=True)
    t.start()
    time.sleep(1)
    created: dict[str, float] = {}

    def submit(i: int) -> None:
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"j{i:05d}", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "tolerations": KWOK,
                        "containers": [
                            {"name": "c", "image": "registry.invalid/c:1", "resources": {"requests": {"cpu": "10m"}}}
                        ],
                    }
                }
            },
        }
        batch.create_namespaced_job(ns, job)
        created[f"j{i:05d}"] = time.monotonic()

    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(submit, range(n)))
    submitted = time.monotonic() - t0
    wait_for(lambda: len(admitted) >= n, 600, 0.5)
    stop.set()
    lat = [admitted[j] - created[j] for j in created if j in admitted]
    out = {
        "jobs": n,
        "admitted": len(lat),
        "submit_s": round(submitted, 1),
        "p50_s": round(pct(lat, 50), 3),
        "p90_s": round(pct(lat, 90), 3),
        "p99_s": round(pct(lat, 99), 3),
        "max_s": round(max(lat), 3),
        "jobs_per_s": round(len(lat) / (max(admitted.values()) - t0), 1),
        "mean_s": round(statistics.mean(lat), 3),
    }
    core.delete_namespace(ns)
    wait_for(lambda: not [x for x in core.list_namespace().items if x.metadata.name == ns], 600, 1)
    custom.delete_cluster_custom_object(*API, "clusterqueues", name)
    custom.delete_cluster_custom_object(*API, "resourceflavors", name)
    return out


def converge(cfg: LabConfig, teams: int) -> dict:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        hostvars = {
            "ansible_connection": "local",
            "ansible_python_interpreter": str(REPO / ".venv/bin/python"),
            "gpuops_kubeconfig": str(cfg.kubeconfig),
            "gpuops_chart_repo_mirror": cfg.chart_repo_url,
            "kueue_namespace": "bench-kueue-system",
            "kueue_values": {"controllerManager": {"tolerations": KWOK}},
            "kueue_gpu_flavors": False,
            "kueue_flavors": [{"name": "bench-cpu"}],
            "kueue_teams": [
                {
                    "name": f"team-{i:02d}",
                    "namespaces": [f"bench-team-{i:02d}"],
                    "cohort": "bench",
                    "quotas": [{"flavor": "bench-cpu", "resources": {"cpu": 4}}],
                }
                for i in range(teams)
            ],
        }
        inv = Path(tmp) / "inv.yml"
        inv.write_text(
            yaml.safe_dump({"all": {"children": {"cluster_controller": {"hosts": {"localhost": hostvars}}}}})
        )
        pb = Path(tmp) / "pb.yml"
        pb.write_text(
            yaml.safe_dump(
                [
                    {
                        "name": "kueue",
                        "hosts": "cluster_controller",
                        "gather_facts": False,
                        "roles": [{"role": "gpuops.platform.kueue"}],
                    }
                ]
            )
        )

        def run(*extra: str) -> tuple[float, int]:
            t0 = time.monotonic()
            r = subprocess.run(
                ["ansible-playbook", str(pb), "-i", str(inv), *extra],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            took = time.monotonic() - t0
            if r.returncode != 0:
                raise SystemExit(f"kueue role {extra} failed:\n{r.stdout[-4000:]}")
            return took, sum(int(m.group(3)) for m in RECAP.finditer(r.stdout))

        first, changed = run()
        again, changed_again = run()
        run("-e", json.dumps({"kueue_state": "absent"}))
    core = client.CoreV1Api(config.new_client_from_config(str(cfg.kubeconfig)))
    for i in range(teams):
        core.delete_namespace(f"bench-team-{i:02d}")
    return {
        "teams": teams,
        "converge_s": round(first, 1),
        "converge_changed": changed,
        "rerun_s": round(again, 1),
        "rerun_changed": changed_again,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--teams", type=int, default=50)
    ap.add_argument("--workers", type=int, default=8, help="parallel Job creations")
    args = ap.parse_args()
    cfg = LabConfig.load()
    api = config.new_client_from_config(str(cfg.kubeconfig))
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "kueue": cfg.versions["KUEUE_VERSION"],
        "admission": admission(api, args.jobs, args.workers),
        "role": converge(cfg, args.teams),
    }
    out = REPO / "benchmarks" / "results" / f"kueue-{time.strftime('%Y%m%d', time.gmtime())}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""CLI of the local lab: python -m gpuops_lab {build,up,down,status,nodes,table,monitoring,dcgm-fault,eda}."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import dcgm, eda, monitoring, nodes
from .cluster import Lab
from .config import LabConfig
from .errors import LabError
from .k8s import wait_for


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpuops_lab", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build (or reuse) the control plane binaries")
    up = sub.add_parser("up", help="start the lab (idempotent)")
    up.add_argument("--inventory-nodes", action="store_true", help="create the local inventory's nodes")
    up.add_argument(
        "--monitoring",
        action="store_true",
        help="also start Prometheus, kube-state-metrics, the simulated dcgm-exporters",
    )
    mon = sub.add_parser("monitoring", help="the lab's Prometheus and simulated dcgm-exporters (docs/local-lab.md)")
    mon.add_argument("action", choices=("up", "down", "sync", "status"))
    ev = sub.add_parser(
        "eda",
        help="the remediation rulebook (ansible-rulebook, gpuops.platform.remediate) on the lab Alertmanager's webhook",
    )
    ev.add_argument("action", choices=("up", "down", "status"))
    ev.add_argument("--mode", choices=eda.MODES, default="dry_run", help="the playbook's mode (default: dry_run)")
    ev.add_argument(
        "-e",
        "--var",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a variable of the cluster controller host (VALUE read as YAML), e.g. gpuops_remediation_namespace=ops",
    )
    fault = sub.add_parser("dcgm-fault", help="inject or clear a simulated GPU fault seen by the dcgm-exporter")
    fsub = fault.add_subparsers(dest="action", required=True)
    fi = fsub.add_parser(
        "inject", help=f"presets: {', '.join(dcgm.PRESETS)}; or KEY=VALUE ({', '.join(dcgm.FAULT_KEYS)})"
    )
    fi.add_argument("node")
    fi.add_argument("gpu", help="GPU index, or 'exporter' for the node's exporter itself (answers 503)")
    fi.add_argument("fault", nargs="*", help="presets and KEY=VALUE words")
    fc = fsub.add_parser("clear")
    fc.add_argument("node", nargs="?")
    fc.add_argument("gpu", nargs="?", type=int)
    fsub.add_parser("list")
    sub.add_parser("down", help="stop every lab process and remove all lab state")
    sub.add_parser("status", help="which components run; exit 1 when one is down")
    np_ = sub.add_parser("nodes", help="add or remove simulated nodes")
    nsub = np_.add_subparsers(dest="action", required=True)
    a = nsub.add_parser("add")
    a.add_argument("profile")
    a.add_argument("-n", "--count", type=int, default=1)
    a.add_argument("--prefix")
    r = nsub.add_parser("remove")
    r.add_argument("names", nargs="*")
    r.add_argument("--profile")
    si = nsub.add_parser("sync-inventory", help="a node and a simulated host per inventory host naming a profile")
    si.add_argument("--inventory", type=Path, help="a YAML inventory (default: inventories/local/hosts.yml)")
    t = sub.add_parser("table", help="readiness table of the nodes")
    t.add_argument(
        "--wait", type=float, default=0, help="seconds to wait for every node to be Ready and labelled by NFD"
    )
    args = ap.parse_args(argv)
    cfg = LabConfig.load()
    lab = Lab(cfg)
    try:
        if args.cmd == "build":
            lab.build()
        elif args.cmd == "up":
            lab.up()
            if args.inventory_nodes:
                created = nodes.sync_inventory(nodes.api(cfg), hosts_root=cfg.hosts)
                print(f"inventory nodes: {', '.join(created) or 'all present'}")
            if args.monitoring:
                monitoring.start(cfg)
        elif args.cmd == "monitoring":
            if args.action == "up":
                monitoring.start(cfg)
            elif args.action == "down":
                print(f"stopped: {', '.join(monitoring.stop(cfg)) or 'nothing was running'}")
            elif args.action == "sync":
                res = monitoring.sync(cfg)
                print(f"jobs (targets): {res.jobs}\nrules files: {res.rules}\nexporter nodes: {res.exporter_nodes}")
                print(f"skipped: {res.skipped}\nPrometheus reloaded: {res.reloaded}")
            else:
                st = monitoring.status(cfg)
                for name, pid in st.items():
                    print(f"{name:24} {'running pid ' + str(pid) if pid else 'DOWN'}")
                print(f"Prometheus: {monitoring.prometheus_url(cfg)}")
                return 0 if all(st.values()) else 1
        elif args.cmd == "eda":
            if args.action == "up":
                eda.up(cfg, args.mode, eda.parse_vars(args.var))
            elif args.action == "down":
                print(f"eda: {'stopped' if eda.down(cfg) else 'nothing was running'}")
            else:
                st = eda.status(cfg)
                print(json.dumps(st, indent=1, sort_keys=True))
                return 0 if st["running"] else 1
        elif args.cmd == "dcgm-fault":
            if args.action == "inject":
                if args.gpu == "exporter":
                    got = dcgm.inject(cfg.state, args.node, None, {dcgm.EXPORTER_DOWN: True})
                elif args.gpu.isdigit():
                    got = dcgm.inject(cfg.state, args.node, int(args.gpu), dcgm.fault_spec(args.fault))
                else:
                    raise LabError(f"gpu must be an index or 'exporter', got {args.gpu!r}")
            elif args.action == "clear":
                got = dcgm.clear(cfg.state, args.node, args.gpu)
            else:
                got = dcgm.read_faults(cfg.state)
            print(json.dumps(got, indent=1, sort_keys=True))
        elif args.cmd == "down":
            used = lab.cpu()
            if used:
                total = sum(used.values())
                top = ", ".join(f"{n} {s:.1f}" for n, s in sorted(used.items(), key=lambda kv: -kv[1]))
                print(f"lab CPU seconds: {total:.1f} ({top})")
            stopped = lab.down()
            print(f"stopped: {', '.join(stopped) or 'nothing was running'}; removed {cfg.state}")
        elif args.cmd == "status":
            st = lab.status()
            for name, pid in st.items():
                print(f"{name:24} {'running pid ' + str(pid) if pid else 'DOWN (log ' + str(lab.proc(name).log) + ')'}")
            return 0 if all(st.values()) else 1
        elif args.cmd == "nodes":
            core = nodes.api(cfg)
            if args.action == "add":
                t0 = time.monotonic()
                made = nodes.add(core, args.profile, args.count, prefix=args.prefix)
                print(f"added {len(made)} node(s) in {time.monotonic() - t0:.2f}s: {' '.join(made)}")
            elif args.action == "remove":
                if not args.names and not args.profile:
                    raise LabError("name the nodes to remove, or pass --profile NAME")
                print(f"removed: {' '.join(nodes.remove(core, args.names, args.profile)) or 'nothing'}")
            else:
                path = args.inventory or nodes.LOCAL_INVENTORY
                print(f"created: {' '.join(nodes.sync_inventory(core, path, hosts_root=cfg.hosts)) or 'all present'}")
        elif args.cmd == "table":
            core = nodes.api(cfg)
            if args.wait:
                wait_for(lambda: nodes.settled(core), args.wait)
            rs = nodes.rows(core)
            print(nodes.table(rs))
            return 0 if rs and all(r["READY"] == "True" for r in rs) else 1
    except LabError as exc:
        print(f"gpuops_lab: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CLI: python -m gpuops_lab.hostsim {create,destroy,build,run,apply,reboot,inventory}."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:  # run --tree DIR -- CMD...: everything after -- is the command, untouched
        from .runner import main as run_main  # noqa: PLC0415

        return run_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m gpuops_lab.hostsim", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("create", help="build <root>/<name>/tree and <root>/<name>/python-wrapper")
    c.add_argument("--profile", required=True)
    c.add_argument("--name", required=True)
    c.add_argument("--root", required=True)
    c.add_argument("--python", help="interpreter the wrapper runs (default: this one)")
    d = sub.add_parser("destroy", help="remove <root>/<name>")
    d.add_argument("--name", required=True)
    d.add_argument("--root", required=True)
    b = sub.add_parser("build", help="write a host tree at --dest")
    b.add_argument("--profile", required=True)
    b.add_argument("--dest", required=True)
    sub.add_parser("run", help="run --tree DIR -- CMD...: run CMD inside the host's namespace")
    for name, text in (
        ("apply", "let the simulated kernel react to writes made outside a namespace"),
        ("reboot", "reboot the simulated host"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--tree", required=True)
    i = sub.add_parser("inventory", help="print a YAML inventory of the hosts under --root")
    i.add_argument("--root", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "create":
        from .hosts import create_host  # noqa: PLC0415

        info = create_host(args.profile, args.name, args.root, python=args.python)
        print(json.dumps({k: info[k] for k in ("name", "profile", "tree", "python", "hostvars")}, indent=1))
    elif args.cmd == "destroy":
        from .hosts import destroy_host  # noqa: PLC0415

        print("removed" if destroy_host(args.name, args.root) else "absent")
    elif args.cmd == "build":
        from .tree import build_tree  # noqa: PLC0415

        info = build_tree(args.profile, args.dest)
        print(json.dumps({k: info[k] for k in ("tree", "profile", "modules", "netdevs", "ibdevs")}, indent=1))
    elif args.cmd in ("apply", "reboot"):
        from . import kernel, power  # noqa: PLC0415
        from .hostfs import Host  # noqa: PLC0415

        host = Host(args.tree)
        out = kernel.apply(host) if args.cmd == "apply" else power.reboot(host)
        print("\n".join(out))
    elif args.cmd == "inventory":
        import yaml  # noqa: PLC0415

        from .hosts import inventory  # noqa: PLC0415

        print(yaml.safe_dump(inventory(args.root), sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

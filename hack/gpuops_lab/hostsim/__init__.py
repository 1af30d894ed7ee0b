"""gpuops_lab.hostsim: simulated GPU hosts presented at the real Linux paths.

- build_tree(profile, dest)            write a host root (sysfs, procfs, /etc, /lib/modules, shims) from a
                                       hardware profile (tree.py)
- run(tree, cmd)                       run a command with that root at /sys, /proc, /etc, ... in private
                                       namespaces (runner.py)
- create_host / destroy_host / inventory
                                       a tree plus a python wrapper per Ansible host (hosts.py)
- kernel.apply(Host(tree)) / power.reboot(Host(tree))
                                       the simulated kernel (kernel.py)
- probe                                independent readers of a tree for assertions (probe.py)

CLI: python -m gpuops_lab.hostsim {create,destroy,build,run,apply,reboot,inventory}. Nothing happens at
import time."""

from __future__ import annotations

from typing import Any


def build_tree(profile: str | dict[str, Any], dest: Any, **kw: Any) -> dict[str, Any]:
    from .tree import build_tree as _build  # noqa: PLC0415

    return _build(profile, dest, **kw)


def run(tree: Any, cmd: list[str]) -> int:
    from .runner import run as _run  # noqa: PLC0415

    return _run(tree, cmd)


def create_host(profile: str | dict[str, Any], name: str, root: Any, **kw: Any) -> dict[str, Any]:
    from .hosts import create_host as _create  # noqa: PLC0415

    return _create(profile, name, root, **kw)


def destroy_host(name: str, root: Any) -> bool:
    from .hosts import destroy_host as _destroy  # noqa: PLC0415

    return _destroy(name, root)

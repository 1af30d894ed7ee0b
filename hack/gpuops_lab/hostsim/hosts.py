"""Simulated hosts as Ansible inventory hosts: a tree plus a python wrapper that enters its namespace.

    <root>/<name>/tree            the host root (build_tree)
    <root>/<name>/python-wrapper  ansible_python_interpreter: runs the given python inside the namespace

With `ansible_connection: ansible.builtin.local` and that interpreter, every module Ansible runs against the host runs
at the real paths (/sys, /proc/modules, /etc/modprobe.d, ...) of the simulated host."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from .hostfs import META_DIR, write
from .tree import HACK, build_tree

WRAPPER = "python-wrapper"
_RUNNER = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from gpuops_lab.hostsim.runner import main; sys.exit(main(sys.argv[2:]))"
)


def wrapper_script(tree: Path, python: str, hack: Path = HACK) -> str:
    q = shlex.quote
    return (
        "#!/bin/sh\n"
        f"# gpuops hostsim: run python inside the namespace of the simulated host {tree}\n"
        f'exec {q(python)} -I -c {q(_RUNNER)} {q(str(hack))} --tree {q(str(tree))} -- {q(python)} "$@"\n'
    )


def host_vars(name: str, base: Path, profile: str) -> dict[str, Any]:
    return {
        # the FQCN: Mitogen's strategy (hack/run-tests.sh) leaves a host whose connection is named so on Ansible's
        # own local connection, which this wrapper needs (Mitogen's bootstrap does not survive the namespace runner)
        "ansible_connection": "ansible.builtin.local",
        "ansible_python_interpreter": str(base / WRAPPER),
        "gpuops_hostsim_tree": str(base / "tree"),
        "gpuops_hardware_profile": profile,
    }


def create_host(
    profile: str | dict[str, Any], name: str, root: str | os.PathLike[str], *, python: str | None = None
) -> dict[str, Any]:
    """Build <root>/<name>/tree for `profile` and its python wrapper; returns the summary plus
    `python` (the wrapper) and `hostvars` (for an inventory)."""
    python = python or sys.executable
    base = Path(os.path.abspath(root)) / name
    base.mkdir(parents=True, exist_ok=True)
    info = build_tree(profile, base / "tree", name=name, python=python)
    wrapper = base / WRAPPER
    write(wrapper, wrapper_script(base / "tree", python), 0o755)
    info["python"] = str(wrapper)
    info["hostvars"] = host_vars(name, base, info["profile"])
    return info


def destroy_host(name: str, root: str | os.PathLike[str]) -> bool:
    base = Path(os.path.abspath(root)) / name
    if not base.exists():
        return False
    if not (base / "tree" / META_DIR / "meta.json").exists():
        raise FileNotFoundError(f"{base} is not a hostsim host (no tree/{META_DIR}/meta.json); not removing it")
    shutil.rmtree(base)
    return True


def inventory(root: str | os.PathLike[str], group: str = "hostsim") -> dict[str, Any]:
    """An Ansible YAML-inventory dict of every host under `root`."""
    import json  # noqa: PLC0415

    hosts = {}
    base = Path(os.path.abspath(root))
    for meta in sorted(base.glob(f"*/tree/{META_DIR}/meta.json")):
        m = json.loads(meta.read_text())
        hosts[m["name"]] = host_vars(m["name"], meta.parents[2], m["profile"])
    return {"all": {"children": {group: {"hosts": hosts}}}}

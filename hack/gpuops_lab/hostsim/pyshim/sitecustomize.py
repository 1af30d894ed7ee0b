"""gpuops hostsim: inside a simulated host's namespace, os.uname() (and so platform.release(), Ansible's
ansible_kernel fact, ...) reports the simulated kernel. The runner puts this directory first on
PYTHONPATH; outside a namespace (no /run/gpuops-sim/uname.json) nothing is changed. An existing
sitecustomize further down sys.path still runs."""

import importlib.machinery
import importlib.util
import json
import os
import sys


def _patch() -> None:
    try:
        with open("/run/gpuops-sim/uname.json") as fh:
            u = json.load(fh)
    except (OSError, ValueError):
        return
    real = os.uname

    def uname() -> os.uname_result:
        r = real()
        return os.uname_result((r.sysname, r.nodename, u["release"], u["version"], u["machine"]))

    os.uname = uname


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec and spec.loader and spec.origin != os.path.abspath(__file__):
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)


_patch()
try:
    _chain()
except Exception:  # noqa: BLE001 - a broken site hook must not break the interpreter
    pass

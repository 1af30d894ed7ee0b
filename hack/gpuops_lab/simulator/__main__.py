"""`python -m gpuops_lab.simulator --kubeconfig PATH [--handlers SPEC] [--log-level info]`

Runs the operator simulator until SIGTERM or SIGINT, then exits 0. Prints `simulator ready` on stdout
once every watch is established (the lab's process supervisor waits for that line). Logs go to stderr.

--handlers is a comma-separated list of `builtin` (every class in handlers.BUILTIN_HANDLERS, the
default), `none`, or `module:attribute` where the attribute is a Handler subclass, a Handler instance
or a list of either.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from .framework import Handler, RealClient, Simulator

LOG = logging.getLogger("gpuops_lab.simulator")


def _instances(value: Any, origin: str) -> list[Handler]:
    if isinstance(value, Handler):
        return [value]
    if isinstance(value, type) and issubclass(value, Handler):
        return [value()]
    if isinstance(value, list | tuple):
        out: list[Handler] = []
        for item in value:
            out.extend(_instances(item, origin))
        return out
    raise ValueError(f"{origin}: {value!r} is not a Handler subclass, instance or list of them")


def load_handlers(spec: str | None) -> list[Handler]:
    handlers: list[Handler] = []
    for entry in [e.strip() for e in (spec or "builtin").split(",") if e.strip()]:
        if entry == "none":
            continue
        if entry == "builtin":
            from .handlers import BUILTIN_HANDLERS

            handlers.extend(_instances(list(BUILTIN_HANDLERS), entry))
            continue
        module_name, sep, attr = entry.partition(":")
        if not sep or not module_name or not attr:
            raise ValueError(f"--handlers entry {entry!r} is not builtin, none or module:attribute")
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
        handlers.extend(_instances(value, entry))
    return handlers


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gpuops_lab.simulator", description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--kubeconfig", required=True, help="kubeconfig of the cluster to simulate operators in")
    p.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    p.add_argument("--handlers", default="builtin", help="builtin, none or module:attr, comma-separated")
    p.add_argument("--resync-period", type=float, default=10.0, help="seconds between full resyncs")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        handlers = load_handlers(args.handlers)
    except (ImportError, AttributeError, ValueError) as exc:
        LOG.error("cannot load handlers: %s", exc)
        return 2
    stop = threading.Event()

    def _signal(signum: int, _frame: Any) -> None:
        LOG.info("received %s; stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _signal)
    signal.signal(signal.SIGINT, _signal)
    client = RealClient.from_kubeconfig(args.kubeconfig, args.context)
    sim = Simulator(client, handlers, resync_period=args.resync_period)
    sim.start()
    try:
        while not stop.is_set():
            if sim.wait_ready(timeout=0.5):
                LOG.info("all watches established")
                print("simulator ready", flush=True)
                break
        while not stop.wait(1.0):
            pass
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

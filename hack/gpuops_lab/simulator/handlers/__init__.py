"""Registry of the simulator's built-in handlers: `python -m gpuops_lab.simulator` runs one instance of
each class listed in BUILTIN_HANDLERS (unless --handlers says otherwise). A handler for another operator
goes in its own module here and is appended to the list.

The example handler (`example.FakeDevicePlugin`) is deliberately not listed: it proves the framework
and is run by the tests themselves (in-process), so the lab's long-running simulator never acts on the
objects a test owns. Run it from the command line with
`--handlers builtin,gpuops_lab.simulator.handlers.example:FakeDevicePlugin`."""

from __future__ import annotations

from ..framework import Handler

BUILTIN_HANDLERS: list[type[Handler]] = []

__all__ = ["BUILTIN_HANDLERS"]

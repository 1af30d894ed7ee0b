"""Registry of the simulator's built-in handlers: `python -m gpuops_lab.simulator` runs one instance of
each class listed in BUILTIN_HANDLERS (unless --handlers says otherwise). A handler for another operator
goes in its own module here and is appended to the list.

- `nvidia.ClusterPolicyHandler`: the NVIDIA GPU Operator (ClusterPolicy nvidia.com/v1).
- `amd.DeviceConfigHandler`: the AMD GPU Operator (DeviceConfig amd.com/v1alpha1).

Built-in instances handle only objects (custom resources, nodes) without the label
`sim.gpuops.io/instance`; a test runs its own instance in-process (`ClusterPolicyHandler(instance=...)`)
for objects carrying that label, so the lab's long-running simulator never acts on them.

The example handler (`example.FakeDevicePlugin`) is deliberately not listed: it proves the framework
and is run by the tests themselves (in-process), so the lab's long-running simulator never acts on the
objects a test owns. Run it from the command line with
`--handlers builtin,gpuops_lab.simulator.handlers.example:FakeDevicePlugin`."""

from __future__ import annotations

from ..framework import Handler
from .amd import DeviceConfigHandler
from .nvidia import ClusterPolicyHandler

BUILTIN_HANDLERS: list[type[Handler]] = [ClusterPolicyHandler, DeviceConfigHandler]

__all__ = ["BUILTIN_HANDLERS"]

"""Registry of the simulator's built-in handlers: `python -m gpuops_lab.simulator` runs one instance of
each class listed in BUILTIN_HANDLERS (unless --handlers says otherwise). A handler for another operator
goes in its own module here and is appended to the list.

- `nvidia.ClusterPolicyHandler`: the NVIDIA GPU Operator (ClusterPolicy nvidia.com/v1).
- `amd.DeviceConfigHandler`: the AMD GPU Operator (DeviceConfig amd.com/v1alpha1).
- `network.NicClusterPolicyHandler`: the NVIDIA Network Operator (NicClusterPolicy mellanox.com/v1alpha1), and
  `network.NETWORK_HANDLERS` its MacvlanNetwork / HostDeviceNetwork / IPoIBNetwork controllers.
- `sriov.SriovNetworkNodeStateHandler`: the SR-IOV Network Operator's config daemon and device plugin (the node
  side of SriovNetworkNodeState; the operator itself runs for real in the lab).
- `dra.DraKubeletPluginHandler`: the kubelet plugin of kubernetes-sigs/dra-driver-nvidia-gpu (a ResourceSlice per
  node running its pod); the real kube-scheduler allocates claims against them.
- `nfd.NfdWorkerHandler`: nfd-worker (a NodeFeature per node, from its hardware profile); the lab's real
  nfd-master turns them into node labels.

Built-in instances handle only objects (custom resources, nodes) without the label
`sim.gpuops.io/instance`; a test runs its own instance in-process (`ClusterPolicyHandler(instance=...)`)
for objects carrying that label, so the lab's long-running simulator never acts on them.

The NfdWorker handler has no instances: nfd-worker runs on every node. (Volcano has no handler: the lab runs its
scheduler and controller-manager for real, volcano.py.)"""

from __future__ import annotations

from ..framework import Handler
from .amd import DeviceConfigHandler
from .dra import DraKubeletPluginHandler
from .network import NETWORK_HANDLERS, NicClusterPolicyHandler
from .nfd import NfdWorkerHandler
from .nvidia import ClusterPolicyHandler
from .sriov import SriovNetworkNodeStateHandler

BUILTIN_HANDLERS: list[type[Handler]] = [
    NfdWorkerHandler,
    ClusterPolicyHandler,
    DeviceConfigHandler,
    NicClusterPolicyHandler,
    *NETWORK_HANDLERS,
    SriovNetworkNodeStateHandler,
    DraKubeletPluginHandler,
]

__all__ = ["BUILTIN_HANDLERS"]

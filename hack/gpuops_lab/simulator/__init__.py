"""The operator simulator: a small controller process that plays, on kwok-simulated nodes, the part of
operator components that need real GPUs (device plugins advertising resources, driver pods failing in
documented ways, labels a feature discovery would set). `framework` is the engine; handlers (one per
simulated component) live in `handlers`; `faults` describes how tests inject named faults per node.

Run it with `python -m gpuops_lab.simulator --kubeconfig PATH`."""

from __future__ import annotations

from .faults import FAULTS_ANNOTATION, FAULTS_CONFIGMAP, FAULTS_NAMESPACE, FaultStore, parse_faults
from .framework import (
    CONFIGMAP,
    DAEMONSET,
    DEPLOYMENT,
    MANAGED_STATUS_ANNOTATION,
    NAMESPACE,
    NODE,
    POD,
    ApiError,
    Cache,
    Context,
    Handler,
    Informer,
    Key,
    Kind,
    KubeClient,
    RealClient,
    Simulator,
    WorkQueue,
)

__all__ = [
    "CONFIGMAP",
    "DAEMONSET",
    "DEPLOYMENT",
    "FAULTS_ANNOTATION",
    "FAULTS_CONFIGMAP",
    "FAULTS_NAMESPACE",
    "MANAGED_STATUS_ANNOTATION",
    "NAMESPACE",
    "NODE",
    "POD",
    "ApiError",
    "Cache",
    "Context",
    "FaultStore",
    "Handler",
    "Informer",
    "Key",
    "Kind",
    "KubeClient",
    "RealClient",
    "Simulator",
    "WorkQueue",
    "parse_faults",
]

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Labels, resource names and operand names the cluster status and the diagnosis read: node labels set by
NFD and the operators, the GPU Operator's operand DaemonSets and the validator's init steps. One place, so a
new kind of node or operand adds a row here."""

from __future__ import annotations

import re
from typing import Any

VENDORS = ("nvidia", "amd")


def base_product(product: Any) -> str | None:
    """GFD's nvidia.com/gpu.product without what sharing appends: ``-SHARED`` (time-slicing, MPS) or
    ``-MIG-<profile>`` (MIG, single strategy); ``NVIDIA-H100-80GB-HBM3-MIG-1g.10gb`` -> ``NVIDIA-H100-80GB-HBM3``."""
    return re.split(r"-SHARED|-MIG-", str(product or ""), maxsplit=1)[0] or None


NFD = "feature.node.kubernetes.io"
NVIDIA_NFD_LABELS = (f"{NFD}/pci-10de.present", f"{NFD}/pci-0302_10de.present", f"{NFD}/pci-0300_10de.present")

# GPU Operator operand DaemonSets and the role each plays on a node
DRIVER = "nvidia-driver-daemonset"
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"


ROLES = {
    "nvidia-container-toolkit-daemonset": "toolkit",
    DEVICE_PLUGIN: "device-plugin",
    "gpu-feature-discovery": "gfd",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-dcgm": "dcgm",
    "nvidia-mig-manager": "mig-manager",
    "nvidia-operator-validator": "validator",
}

# Validator init containers, in order, and the operand each one waits for.
VALIDATION_STEPS = {
    "driver-validation": "driver",
    "toolkit-validation": "toolkit",
    "cuda-validation": "cuda",
    "plugin-validation": "device-plugin",
}

# Node labels and resources that tell a GPU node's vendor
GPU_PRESENT = "nvidia.com/gpu.present"
AMD_LABELS = (f"{NFD}/amd-gpu", f"{NFD}/pci-1002.present")
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"

# Operator (controller) pods, by label
OPERATOR_LABELS = (("app", "gpu-operator"), ("app.kubernetes.io/component", "gpu-operator"))
AMD_OPERATOR_LABELS = (("control-plane", "controller-manager"),)

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: driver_upgrade_progress
short_description: Where the GPU Operator's driver upgrade stands, node by node
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - Reads the driver upgrade controller's node label C(nvidia.com/gpu-driver-upgrade-state) (NVIDIA
    k8s-operator-libs C(pkg/upgrade), driver name C(gpu)) and sorts the nodes into done, in progress, pending,
    failed and skipped (label C(nvidia.com/gpu-driver-upgrade.skip=true)); the collection's private module_utils
    C(_upgrade.progress).
  - A node in C(upgrade-failed) is an error finding that says where to look and how to roll back.
positional: driver_nodes, namespace, driver_pods, driver_version
options:
  _input:
    description: The Node objects.
    type: list
    elements: dict
    required: true
  driver_nodes:
    description: The names of the nodes the driver runs on; null for every node that carries the state label.
    type: list
    elements: str
  namespace:
    description: The GPU Operator's namespace (for the messages).
    type: str
    default: gpu-operator
  driver_pods:
    description:
      - The driver pods (label C(app=nvidia-driver-daemonset)); with O(driver_version), the nodes whose pod does not
        run that version are RV(_value.stale) and the upgrade is not complete.
    type: list
    elements: dict
  driver_version:
    description: The driver version every driver pod's image tag must carry (C(595.91.07) or C(595.91.07-<os>)).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Follow the driver upgrade
  kubernetes.core.k8s_info:
    kind: Node
  register: _nodes
  until: (_nodes.resources | gpuops.platform.driver_upgrade_progress(_driver_nodes)).complete
  retries: 120
  delay: 5
"""

RETURN = r"""
_value:
  description: The progress.
  type: dict
  contains:
    states:
      description: Node name to its state label (empty when not labelled yet).
      type: dict
    done:
      description: Nodes in upgrade-done.
      type: list
      elements: str
    in_progress:
      description: Nodes between upgrade-required and upgrade-done.
      type: list
      elements: str
    pending:
      description: Nodes not started (no label yet, or upgrade-required).
      type: list
      elements: str
    failed:
      description: Nodes in upgrade-failed.
      type: list
      elements: str
    skipped:
      description: Nodes the skip label keeps out of the upgrade.
      type: list
      elements: str
    stale:
      description: Nodes whose driver pod does not run O(driver_version) (empty without O(driver_pods)).
      type: list
      elements: str
    complete:
      description: Whether every node of the upgrade is upgrade-done and none is stale.
      type: bool
    findings:
      description: One error per failed node.
      type: list
      elements: dict
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release import _upgrade  # noqa: E402


def driver_upgrade_progress(
    nodes: Any,
    driver_nodes: Any = None,
    namespace: str = "gpu-operator",
    driver_pods: Any = None,
    driver_version: str = "",
) -> dict[str, Any]:
    if not isinstance(nodes, list):
        raise AnsibleFilterError("driver_upgrade_progress expects the Node objects (a list)")
    if driver_nodes is not None and not isinstance(driver_nodes, list):
        raise AnsibleFilterError("driver_upgrade_progress expects driver_nodes as a list of node names, or null")
    if driver_pods is not None and not isinstance(driver_pods, list):
        raise AnsibleFilterError("driver_upgrade_progress expects driver_pods as a list of Pod objects, or null")
    return _upgrade.progress(nodes, driver_nodes, namespace, driver_pods, str(driver_version or ""))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"driver_upgrade_progress": driver_upgrade_progress}

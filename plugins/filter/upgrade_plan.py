# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: upgrade_plan
short_description: Decide a GPU Operator upgrade against the compatibility table before anything changes
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - Places the installed GPU Operator chart version and the target on NVIDIA's release lines and checks the
    Kubernetes minor, the driver version and, when given, the Network Operator against the collection's
    compatibility table (the collection's private module_utils C(_upgrade), every row with its source).
  - Returns the plan with its findings C({id, severity, object, evidence, cause, fix}); a version the table does not
    know is an error, never a guess.
positional: target, kubernetes_version
options:
  _input:
    description:
      - The installed chart version (for example V(v26.3.1)), or the release's chart as C(helm list) and
        M(gpuops.platform.helm_release_info) show it (V(gpu-operator-v26.3.1)); null or empty when the release is not
        installed.
    type: str
    required: true
  target:
    description: The chart version to upgrade to.
    type: str
    required: true
  kubernetes_version:
    description: The API server's version (C(gitVersion), for example V(v1.34.4)).
    type: str
    required: true
  driver_version:
    description: The driver version asked for; empty for the target chart's default.
    type: str
    default: ""
  current_driver:
    description: The driver version the ClusterPolicy has now (to report a driver bump).
    type: str
    default: ""
  network_operator_version:
    description: The installed NVIDIA Network Operator chart version (or its release's chart), empty when there is none.
    type: str
    default: ""
  rdma:
    description: Whether GPUDirect RDMA is on (the driver's C(rdma.enabled)).
    type: bool
    default: false
  release:
    description: The GPU Operator's Helm release name (for the messages).
    type: str
    default: gpu-operator
  namespace:
    description: Its namespace (for the messages).
    type: str
    default: gpu-operator
  doca_driver:
    description:
      - The DOCA driver container tag the Network Operator is given (C(network_operator_ofed_driver_version)); empty
        for its release's own.
      - A tag other than the one the Network Operator release ships is reported as a warning.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Decide the upgrade
  ansible.builtin.set_fact:
    _plan: >-
      {{ _release.chart | gpuops.platform.upgrade_plan('v26.7.0', _cluster.version.server.kubernetes.gitVersion,
         current_driver=_policy.spec.driver.version) }}
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    findings:
      description: Errors and warnings, each with its evidence, cause and fix.
      type: list
      elements: dict
    from:
      description: The installed version, or null.
      type: str
    to:
      description: The target version.
      type: str
    driver_from:
      description: The driver version before.
      type: str
    driver_to:
      description: The driver version after (the target chart's default when none is asked for).
      type: str
    driver_bump:
      description: Whether the driver version changes, so every GPU node's driver is replaced, node by node.
      type: bool
    kubernetes_minor:
      description: The minor of the API server's version, or null.
      type: int
"""

from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release import _upgrade  # noqa: E402


def upgrade_plan(
    current: Any,
    target: Any,
    kubernetes_version: Any,
    driver_version: str = "",
    current_driver: str = "",
    network_operator_version: str = "",
    rdma: bool = False,
    release: str = "gpu-operator",
    namespace: str = "gpu-operator",
    doca_driver: str = "",
) -> dict[str, Any]:
    if current is not None and not isinstance(current, str):
        raise AnsibleFilterError("upgrade_plan expects the installed chart version (a string) or null")
    if not isinstance(target, str) or not target:
        raise AnsibleFilterError("upgrade_plan expects the target chart version (a string)")
    return _upgrade.plan(
        current or None,
        target,
        str(kubernetes_version or ""),
        driver_version=str(driver_version or ""),
        current_driver=str(current_driver or ""),
        network_operator_version=str(network_operator_version or ""),
        rdma=bool(rdma),
        release=release,
        namespace=namespace,
        doca_driver=str(doca_driver or ""),
    )


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"upgrade_plan": upgrade_plan}

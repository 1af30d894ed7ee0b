# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: sharing_plan
short_description: What the gpu_sharing role applies - pool members, guards, ConfigMap entries, node labels
version_added: 0.2.0
author: gpuops.platform maintainers
description:
  - From the role's (valid) pools and the cluster's nodes, with the collection's private module_utils C(_sharing) and
    C(_sharing_status) - the nodes of each pool (a node in two pools and a pool matching no node are findings), the
    MIG name on every GPU model of a MIG pool, the DRA guards (Kubernetes 1.34 with C(resource.k8s.io/v1), NVIDIA
    driver 580 on the hosts), the device-plugin ConfigMap entries (YAML text per entry, C(exclusive) included), the
    node label patches (only labels the role owns, recorded in the node annotation
    C(gpuops.platform/sharing-labels), are removed), the expected capacity per node, and the MIG and DRA nodes.
positional: nodes, groups, host_facts, kubernetes_version, served_versions, pods, allow_mig_change
options:
  _input:
    description:
      - The role's variables (C(gpu_sharing_pools), C(gpu_sharing_mig_strategy), C(gpu_sharing_mig_configs)); no pools
        for state absent.
    type: dict
    required: true
  nodes:
    description: The Node objects of the cluster, as listed.
    type: list
    elements: dict
    required: true
  groups:
    description: Inventory groups (group name -> host names).
    type: dict
    default: {}
  host_facts:
    description: Host name -> C(gpuops_host) facts (accelerators, nvidia_driver.version).
    type: dict
    default: {}
  kubernetes_version:
    description: The API server's C(gitVersion).
    type: str
    default: ""
  served_versions:
    description: The versions of C(resource.k8s.io) the API server serves.
    type: list
    elements: str
    default: []
  pods:
    description:
      - The Pod objects of the nodes whose MIG layout changes (C(mig_change_nodes) of a plan without them, or every
        pod); a MIG change on a node where pods hold GPUs is an error naming them.
    type: list
    elements: dict
    default: []
  allow_mig_change:
    description: Make that MIG change finding a warning (C(gpu_sharing_allow_mig_change_with_gpu_pods)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan the sharing pools
  ansible.builtin.set_fact:
    _plan: "{{ _vars | gpuops.platform.sharing_plan(_nodes.resources, groups, _facts, _version, _served) }}"
"""

RETURN = r"""
_value:
  description:
    - C(members) (pool -> nodes), C(findings), C(configs) (entry -> YAML text), C(labels) (per node
      C({name, labels, annotations}) to merge-patch), C(expected) (node -> resource -> count),
      C(mig_change_nodes) (the nodes whose C(nvidia.com/mig.config) the patches change, whose pods O(pods) must
      hold), C(mig_nodes),
      C(dra_nodes), C(mig_parted_config) (the custom MIG ConfigMap's C(config.yaml); empty without
      C(gpu_sharing_mig_configs)).
  type: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402
from typing import Any  # noqa: E402

import yaml  # noqa: E402
from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils import _sharing, _sharing_status  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._plain import plain  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_views  # noqa: E402


def sharing_plan(  # pylint: disable=too-many-arguments,too-many-positional-arguments,too-many-locals
    variables: Any,
    nodes: Any,
    groups: Any = None,
    host_facts: Any = None,
    kubernetes_version: str = "",
    served_versions: Any = None,
    pods: Any = None,
    allow_mig_change: bool = False,
) -> dict[str, Any]:
    if not isinstance(variables, Mapping) or not isinstance(nodes, list):
        raise AnsibleFilterError("sharing_plan expects the gpu_sharing_* variables (dict) and the nodes (list)")
    pools = list(variables.get(_sharing.VAR_POOLS) or [])
    strategy = variables.get(_sharing.VAR_MIG_STRATEGY) or "single"
    # plain: the variables' values are Ansible's tagged types, which safe_dump does not represent
    mig_configs = plain(variables.get(_sharing.VAR_MIG_CONFIGS) or {})
    groups = groups or {}
    by_name: dict[Any, Any] = {(n.get("metadata") or {}).get("name"): n for n in nodes}
    member_input: dict[Any, dict[str, Any]] = {
        name: {
            "labels": (n.get("metadata") or {}).get("labels") or {},
            "groups": [g for g, hosts in groups.items() if name in (hosts or ())],
        }
        for name, n in by_name.items()
    }
    members, findings = _sharing.pool_members(pools, member_input)
    facts = _cluster_views.match_host_facts(host_facts or {}, list(by_name))
    gpus = {
        name: _sharing_status.nvidia_gpus(facts.get(name), member_input[name]["labels"], mig_configs)
        for name in by_name
    }
    findings += _sharing.mig_findings(pools, members, gpus, mig_configs)
    findings += _sharing.mig_strategy_findings(pools, members, gpus, strategy, mig_configs)
    drivers = {name: _sharing_status.driver_version(facts.get(name), member_input[name]["labels"]) for name in by_name}
    findings += _sharing.dra_findings(pools, members, kubernetes_version or "", list(served_versions or []), drivers)
    configs = {
        # plain: the variables' values are Ansible's tagged types, which safe_dump does not represent
        entry: yaml.safe_dump(plain(cfg), default_flow_style=False, sort_keys=True)
        for entry, cfg in _sharing.device_plugin_configs(pools).items()
    }
    expected = {
        node: _sharing.expected_capacity(pool, gpus[node], strategy, mig_configs)
        for pool in pools
        for node in members.get(pool["name"], ())
    }
    labels = _sharing_status.label_plan(nodes, pools, members)
    findings += _sharing_status.mig_change_findings(
        labels, _sharing_status.gpu_pods(pods or []), bool(allow_mig_change)
    )
    return {
        "members": members,
        "findings": findings,
        "configs": configs,
        # the custom MIG ConfigMap's config.yaml (mig-parted v1), empty without custom configs
        "mig_parted_config": yaml.safe_dump(
            _sharing.mig_parted_config(mig_configs), default_flow_style=False, sort_keys=True
        )
        if mig_configs
        else "",
        "labels": labels,
        "expected": expected,
        "mig_change_nodes": _sharing_status.mig_change_nodes(labels),
        "mig_nodes": sorted(n for p in pools if p.get("model") == "mig" for n in members.get(p["name"], ())),
        "dra_nodes": sorted(n for p in pools if p.get("model") == "dra" for n in members.get(p["name"], ())),
    }


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sharing_plan": sharing_plan}

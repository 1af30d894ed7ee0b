#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_sharing_plan
short_description: Plan the GPU sharing pools - guards, ConfigMap entries, node labels, restarts - before any change
version_added: 0.4.0
description:
  - The whole plan of the C(gpu_sharing) role in one call; the role's apply tasks only apply its result.
  - "Input rules, from the variables and the inventory alone: each pool field by field, duplicate names, MPS with the
    C(mixed) MIG strategy, the custom MIG configs, a MIG name no GPU has, and with O(groups) a pool's group the
    inventory lacks, a group without hosts and a host in two pools' groups."
  - "With O(cluster) (the default) it reads the cluster - the nodes, the API server's version and served
    C(resource.k8s.io) versions, the device-plugin ConfigMap and pods of O(namespace), and the pods of the nodes whose
    MIG layout changes - and plans: the nodes of each pool (a node in two pools, a pool that matches no node), the MIG
    name on every GPU model of a MIG pool, the single strategy's layouts, the DRA guards (Kubernetes 1.34 with
    C(resource.k8s.io/v1), NVIDIA driver 580), a MIG change under running GPU pods, the device-plugin ConfigMap
    entries, the custom MIG ConfigMap, the node label patches (only labels the role owns, recorded in the node
    annotation C(gpuops.platform/sharing-labels), are removed), the capacity each node will advertise and the
    device-plugin pods to restart after an entry's content changes."
  - A node's GPUs come from its host facts (O(host_facts)) or from GPU Feature Discovery's labels. A MIG pool node
    whose GPU model is neither is a warning (C(sharing-gpu-model-unknown)) - its MIG name is judged when the model is
    known. With O(planning) (the run's plan, before earlier layers ran), a pool that selects on labels NFD or the GPU
    Operator write and matches no node yet, and a DRA node whose driver is not known yet, are warnings too.
  - Returns the fields the C(gpu_operator) role takes from the sharing layer (RV(gpu_operator)); with O(inventory),
    a warning names each one the inventory sets to another value.
  - Fails when a finding is an error, naming each with its evidence and fix; warns for the others.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.info_module
options:
  state:
    description: V(absent) plans every pool away (no pools, no custom MIG configs).
    type: str
    choices: [present, absent]
    default: present
  pools:
    description:
      - The sharing pools (the role's C(gpu_sharing_pools)) - C(name), C(model) (V(exclusive), V(time_slicing),
        V(mps), V(mig), V(dra), V(kai_fraction)), one of C(group) or C(node_selector), and the model's fields.
    type: list
    elements: raw
    default: []
  mig_strategy:
    description: The ClusterPolicy's C(mig.strategy) (C(gpu_sharing_mig_strategy)).
    type: str
    choices: [single, mixed]
    default: single
  mig_configs:
    description: Custom mig-parted configs, name to list of entries (C(gpu_sharing_mig_configs)).
    type: dict
  groups:
    description: Inventory groups (group name to host names, as C(groups)).
    type: dict
  host_facts:
    description: Host name to C(gpuops_host) facts (accelerators, C(nvidia_driver.version)), as far as gathered.
    type: dict
  namespace:
    description: The GPU Operator's namespace, where the device-plugin ConfigMap lives.
    type: str
    default: gpu-operator
  config_map:
    description: The device-plugin ConfigMap's name.
    type: str
    default: gpu-sharing-device-plugin
  mig_config_map:
    description: The custom MIG ConfigMap's name.
    type: str
    default: gpu-sharing-mig-parted
  allow_mig_change_with_gpu_pods:
    description: A MIG change on a node where pods hold GPUs is a warning instead of an error.
    type: bool
    default: false
  cluster:
    description: Read the cluster and plan; V(false) checks the input rules only and reads nothing.
    type: bool
    default: true
  planning:
    description: The run plans before earlier layers ran (see the description).
    type: bool
    default: false
  inventory:
    description:
      - The C(gpu_operator_*) values the inventory sets for the fields of RV(gpu_operator) (unset ones left out);
        each that differs from the hand-off is a warning naming both values.
    type: dict
    default: {}
notes:
  - With O(cluster), the user needs C(list) on nodes, C(get) on the ConfigMap and C(list) on pods in O(namespace),
    and C(list) on pods (field selector C(spec.nodeName)) of the nodes whose MIG layout changes.
seealso:
  - module: gpuops.platform.gpu_sharing_status
"""

EXAMPLES = r"""
- name: Plan the sharing pools (fails on an error finding, nothing changed)
  gpuops.platform.gpu_sharing_plan:
    pools:
      - {name: l40s-shared, model: time_slicing, group: l40s, replicas: 4}
      - {name: h100-mig, model: mig, node_selector: {kubernetes.io/hostname: dgx-h100-0}, mig_config: all-1g.10gb}
    groups: "{{ groups }}"
    namespace: gpu-operator
  register: plan

- name: Check the pools from the variables alone (no cluster read)
  gpuops.platform.gpu_sharing_plan:
    pools: "{{ gpu_sharing_pools }}"
    groups: "{{ groups }}"
    cluster: false
"""

RETURN = r"""
findings:
  description: Findings C({id, severity, object, evidence, cause, fix}).
  returned: always
  type: list
  elements: dict
gpu_operator:
  description:
    - The fields the gpu_operator role takes from the sharing layer - C(gpu_operator_device_plugin_config_name),
      C(gpu_operator_device_plugin_config_default), C(gpu_operator_mig_strategy),
      C(gpu_operator_mig_manager_config_name).
  returned: always
  type: dict
  sample: {gpu_operator_device_plugin_config_name: gpu-sharing-device-plugin,
           gpu_operator_device_plugin_config_default: exclusive, gpu_operator_mig_strategy: single,
           gpu_operator_mig_manager_config_name: ""}
members:
  description: Pool name to its nodes.
  returned: with O(cluster)
  type: dict
configs:
  description: The device-plugin ConfigMap's entries (entry name to YAML text), C(exclusive) included.
  returned: with O(cluster)
  type: dict
mig_parted_config:
  description: The custom MIG ConfigMap's C(config.yaml) (mig-parted C(v1)); empty without custom configs.
  returned: with O(cluster)
  type: str
labels:
  description: Per node whose sharing labels change C({name, labels, annotations}), for a merge patch.
  returned: with O(cluster)
  type: list
  elements: dict
expected:
  description: Node to the resources it will advertise (resource to count).
  returned: with O(cluster)
  type: dict
mig_change_nodes:
  description: The nodes whose C(nvidia.com/mig.config) the patches change.
  returned: with O(cluster)
  type: list
  elements: str
mig_nodes:
  description: The nodes of MIG pools.
  returned: with O(cluster)
  type: list
  elements: str
dra_nodes:
  description: The nodes of DRA pools.
  returned: with O(cluster)
  type: list
  elements: str
restart:
  description:
    - The device-plugin restart - C(changed_entries), C(annotation) (the JSON list of pod UIDs to write with the
      ConfigMap, annotation C(gpuops.platform/stale-device-plugin-pods)), C(pods) and C(nodes) to restart.
  returned: with O(cluster)
  type: dict
objects:
  description:
    - What the role applies in one M(gpuops.platform.k8s_apply) task - the GPU Operator's namespace (privileged), the
      device plugin's ConfigMap (O(config_map), with the restart's annotation) and, with O(mig_configs), mig-parted's
      ConfigMap (O(mig_config_map)), labelled as the role's. None with O(state=absent).
  returned: with O(cluster)
  type: list
  elements: dict
prune:
  description:
    - The O(gpuops.platform.k8s_apply#module:prune) option of that task - the role's ConfigMaps in O(namespace) the
      objects do not hold are deleted (the MIG one without O(mig_configs), both with O(state=absent)).
  returned: with O(cluster)
  type: dict
summary:
  description: One line per pool - its nodes and the capacity each will advertise.
  returned: with O(cluster)
  type: list
  elements: str
api_requests:
  description: HTTP requests made.
  returned: with O(cluster)
  type: int
"""

from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils import _sharing_plan as _plan  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _pools  # noqa: E402

ARGUMENT_SPEC = dict(
    _k8s.auth_argument_spec(),
    state={"type": "str", "choices": ["present", "absent"], "default": "present"},
    pools={"type": "list", "elements": "raw", "default": []},
    mig_strategy={"type": "str", "choices": ["single", "mixed"], "default": "single"},
    mig_configs={"type": "dict"},
    groups={"type": "dict"},
    host_facts={"type": "dict"},
    namespace={"type": "str", "default": "gpu-operator"},
    config_map={"type": "str", "default": "gpu-sharing-device-plugin"},
    mig_config_map={"type": "str", "default": "gpu-sharing-mig-parted"},
    allow_mig_change_with_gpu_pods={"type": "bool", "default": False},
    cluster={"type": "bool", "default": True},
    planning={"type": "bool", "default": False},
    inventory={"type": "dict", "default": {}},
)


def run(ctx: Any) -> dict[str, Any]:
    p = ctx.params
    present = p["state"] == "present"
    findings = _plan.input_findings(
        {
            _pools.VAR_POOLS: p["pools"] if present else [],
            _pools.VAR_MIG_STRATEGY: p["mig_strategy"],
            _pools.VAR_MIG_CONFIGS: p["mig_configs"] if present else {},
        },
        p["groups"],
    )
    fields = _plan.gpu_operator_fields(
        present, p["config_map"], p["mig_strategy"], p["mig_config_map"], p["mig_configs"]
    )
    result: dict[str, Any] = {"changed": False, "gpu_operator": fields}
    if p["cluster"] and not any(f["severity"] == "error" for f in findings):
        _k8s.require_client(ctx.module)
        reader = _k8s.new_reader(p)
        raw = _plan.read(reader, p)
        planned = _plan.plan(p, raw)
        if planned["mig_change_nodes"]:  # a MIG change under GPU pods is refused: read only those nodes' pods
            pods = _plan.read(reader, p, planned["mig_change_nodes"])["pods"]
            planned = _plan.plan(p, raw, pods)
        findings = findings + planned.pop("findings")
        result.update(planned, summary=_plan.summary(p["pools"] if present else [], planned))
        result["api_requests"] = reader.requests
    result["findings"] = findings
    for line in _plan.handoff_warnings(fields, p["inventory"]):
        ctx.warn(line)
    for finding in findings:
        if finding["severity"] != "error":
            ctx.warn(_plan.message(finding))
    errors = [_plan.message(f) for f in findings if f["severity"] == "error"]
    if errors:
        result["failed"] = True
        result["msg"] = "gpu_sharing: " + " || ".join(errors) + " || Nothing was changed."
    return result


def main() -> None:
    run_module(run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()

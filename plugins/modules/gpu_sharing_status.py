#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_sharing_status
short_description: Report the GPU sharing state of each pool's nodes and wait until it is in effect
version_added: 0.2.0
description:
  - Reads the cluster with a constant number of list requests, whatever the number of nodes - nodes, pods in all
    namespaces, with O(config_map) the ConfigMaps of O(namespace), and with a C(dra) pool the ResourceSlices and
    DeviceClasses of C(resource.k8s.io/v1). The count is returned as RV(api_requests).
  - Reports per pool (O(pools), the shape of the C(gpu_sharing) role's C(gpu_sharing_pools)) and node - the model,
    the GPUs, the labels C(nvidia.com/device-plugin.config), C(nvidia.com/mig.config), C(nvidia.com/mig.config.state)
    and C(nvidia.com/gpu.deploy.device-plugin), the capacity the pool's model gives (computed by the collection's
    sharing rules as the device plugin computes it) against the allocatable resources, the ResourceSlices of the
    C(gpu.nvidia.com) driver, and on MIG nodes the pods holding NVIDIA GPUs.
  - The diagnosis names each node that advertises other than expected (C(sharing-capacity-mismatch)), whose MIG
    change failed with the reason (C(sharing-mig-config-failed)), whose config label names an entry the
    device-plugin ConfigMap lacks (C(sharing-config-entry-missing)), where the device plugin and the DRA driver
    both may advertise the GPUs (C(sharing-dra-and-device-plugin)), a missing DRA DeviceClass, a node in two pools
    and a pool that matches no node.
  - Read-only; in check mode the cluster is looked at once, without waiting.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.info_module
options:
  pools:
    description:
      - The sharing pools - C(name), C(model) (V(exclusive), V(time_slicing), V(mps), V(mig), V(dra)), one of
        C(group) (an inventory group, resolved with O(groups)) or C(node_selector), and the model's fields
        (C(replicas), C(rename_by_default), C(mig_config)...). Invalid pools fail the module before any read.
    type: list
    elements: dict
    required: true
  mig_strategy:
    description:
      - The ClusterPolicy's C(mig.strategy); names the MIG resources (C(nvidia.com/gpu) or C(nvidia.com/mig-*)).
    type: str
    choices: [single, mixed]
    default: single
  groups:
    description: Inventory groups (group name -> host names, as C(groups)) for the pools given by C(group).
    type: dict
    default: {}
  host_facts:
    description:
      - Host facts by host name, as set by M(gpuops.platform.gpu_host_facts); a node's NVIDIA GPUs are its
        C(accelerators) with vendor C(10de). Without facts for a node, its GFD label C(nvidia.com/gpu.count) gives
        the GPU count (enough for every model but MIG, whose capacity depends on the GPU model).
    type: dict
  namespace:
    description: Namespace of the GPU Operator, where the device-plugin ConfigMap lives.
    type: str
    default: gpu-operator
  config_map:
    description: Name of the device-plugin ConfigMap in O(namespace) whose entries the nodes' config labels must name.
    type: str
  mig_configs:
    description:
      - Custom mig-parted configs (name -> list of entries, mig-parted format C(v1)) that the ClusterPolicy's
        C(migManager.config.name) ConfigMap holds; the MIG pools' names and expected capacity come from them (the
        role's C(gpu_sharing_mig_configs)). Invalid ones fail the module before any read.
    type: dict
  wait:
    description:
      - Wait until every pool node has its labels, every MIG node C(nvidia.com/mig.config.state=success), every
        time-slicing, MPS and MIG node advertises exactly the expected capacity, every DRA node publishes one
        ResourceSlice device per GPU with the device plugin off, and the DRA DeviceClasses exist; reading the
        cluster again after 1, 2, 4... seconds, at most every O(wait.sleep) seconds, for at most O(wait.timeout).
      - A MIG node in C(failed) ends the wait at once (mig-manager retries only on a label change); the module then
        fails naming the node and the reason.
    type: dict
    suboptions:
      timeout:
        description: Seconds to wait at most.
        type: int
        default: 300
      sleep:
        description: The longest pause between two looks, in seconds.
        type: int
        default: 5
  fail_on_error:
    description: Fail when the diagnosis has a finding of severity V(error). The result is returned either way.
    type: bool
    default: false
notes:
  - The user needs C(list) on nodes and on pods in all namespaces; with O(config_map) on configmaps in O(namespace);
    with a DRA pool on C(resourceslices.resource.k8s.io) and C(deviceclasses.resource.k8s.io).
  - Upstream facts - k8s-device-plugin v0.20.0 multiplies C(nvidia.com/gpu) by C(replicas) (C(nvidia.com/gpu.shared)
    with C(renameByDefault)); mig-manager v0.15.0 sets C(nvidia.com/mig.config.state) to C(pending), then C(success)
    or C(failed); dra-driver-nvidia-gpu 0.4.1 publishes per node a ResourceSlice of driver C(gpu.nvidia.com) with one
    device per GPU.
seealso:
  - module: gpuops.platform.gpu_cluster_status
"""

EXAMPLES = r"""
- name: Wait until the sharing pools are in effect
  gpuops.platform.gpu_sharing_status:
    pools:
      - {name: l40s-shared, model: time_slicing, group: l40s, replicas: 4}
      - {name: h100-mig, model: mig, node_selector: {pool: h100-mig}, mig_config: all-1g.10gb}
    groups: "{{ groups }}"
    host_facts: "{{ dict(_gpu_hosts | zip(_gpu_hosts | map('extract', hostvars, ['ansible_facts', 'gpuops_host']))) }}"
    config_map: gpu-sharing-device-plugin
    wait:
      timeout: 300
  register: sharing
  vars:
    _gpu_hosts: "{{ groups['gpu_nodes'] }}"
"""

RETURN = r"""
pools:
  description: Per pool its name, model and nodes.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The pool's name.
      type: str
    model:
      description: The pool's model.
      type: str
    nodes:
      description:
        - Per node C(name), C(pool), C(model), C(gpus) (count), C(labels) (the four sharing labels, null when absent),
          C(expected) and C(advertised) (resource -> count), C(resource_slices) (C(name), C(devices)), C(gpu_pods)
          (namespace/name, MIG pools only) and, for a failed MIG change, C(mig_failed_reason).
      type: list
      elements: dict
      sample:
        - name: pcie-l40s-0
          pool: l40s-shared
          model: time_slicing
          gpus: 4
          labels: {"nvidia.com/device-plugin.config": "l40s-shared", "nvidia.com/mig.config": null,
                   "nvidia.com/mig.config.state": null, "nvidia.com/gpu.deploy.device-plugin": "true"}
          expected: {"nvidia.com/gpu": 16}
          advertised: {"nvidia.com/gpu": 16}
          resource_slices: []
          gpu_pods: []
table:
  description:
    - The nodes of the pools as a text table - C(NODE), C(POOL), C(MODEL), C(EXPECTED) and C(ADVERTISED)
      (C(resource=count) pairs), C(MIG) (the node's C(nvidia.com/mig.config.state), MIG pools), C(SLICES) (the DRA
      devices the node publishes, DRA pools); C(-) where a column does not apply.
  returned: always
  type: str
  sample: |-
    NODE         POOL         MODEL         EXPECTED            ADVERTISED          MIG  SLICES
    pcie-l40s-0  l40s-shared  time_slicing  nvidia.com/gpu=16  nvidia.com/gpu=16  -    -
diagnosis:
  description: Findings C({id, severity, object, evidence, cause, fix}).
  returned: always
  type: list
  elements: dict
ready:
  description: Whether nothing is pending (labels, MIG state, capacity, slices, DeviceClasses) and nothing failed.
  returned: always
  type: bool
not_ready:
  description: What is not in effect yet - C({kind, namespace, name, condition}).
  returned: always
  type: list
  elements: dict
wait:
  description: With O(wait) - C(ready), C(waited) (false in check mode), C(elapsed) seconds, C(probes).
  returned: when O(wait) is set
  type: dict
api_requests:
  description: HTTP requests made (per look - 2, one more with O(config_map), two more with a DRA pool).
  returned: always
  type: int
"""

from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.sharing import _mig, _pools  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _readiness  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _sharing_status as _status  # noqa: E402

ARGUMENT_SPEC = dict(
    _k8s.auth_argument_spec(),
    pools={"type": "list", "elements": "dict", "required": True},
    mig_strategy={"type": "str", "choices": ["single", "mixed"], "default": "single"},
    groups={"type": "dict", "default": {}},
    host_facts={"type": "dict"},
    namespace={"type": "str", "default": "gpu-operator"},
    config_map={"type": "str"},
    mig_configs={"type": "dict"},
    wait={
        "type": "dict",
        "options": {"timeout": {"type": "int", "default": 300}, "sleep": {"type": "int", "default": 5}},
    },
    fail_on_error={"type": "bool", "default": False},
)


def status(ctx: Any) -> dict[str, Any]:
    params = ctx.params
    bad = _pools.pool_input_findings(params["pools"], params["mig_strategy"])
    bad += _mig.mig_configs_input_findings(params.get("mig_configs"))
    if bad:
        raise InvalidInput(
            "invalid pools: " + "; ".join(f"{f['object']['name']}: {f['cause']}" for f in bad), findings=bad
        )
    wait = params.get("wait")
    if wait and (wait["timeout"] < 0 or wait["sleep"] < 1):
        raise InvalidInput("wait.timeout must be 0 or more and wait.sleep at least 1 second", wait=wait)
    _k8s.require_client(ctx.module)
    reader = _k8s.new_reader(params)
    pools = params["pools"]
    dra = any(p.get("model") == "dra" for p in pools)

    def probe() -> tuple[dict[str, Any], list[_readiness.NotReady]]:
        raw = _status.collect(reader, params["namespace"], params.get("config_map"), dra)
        got = _status.view(raw, pools, params)
        return got, got["not_ready"]

    waiter = _readiness.Waiter(wait["timeout"], wait["sleep"]) if wait and not ctx.check_mode else None
    if waiter is None:
        got, not_ready = probe()
        outcome = None
    else:
        outcome = waiter.wait(probe)
        got, not_ready = outcome.snapshot, outcome.not_ready
    errors = [f for f in got["diagnosis"] if f["severity"] == "error"]
    result = {
        "changed": False,
        "pools": got["pools"],
        "table": _status.table(got["pools"]),
        "diagnosis": got["diagnosis"],
        "not_ready": [n.as_dict() for n in not_ready],
        "ready": not not_ready and not errors,
        "api_requests": reader.requests,
    }
    if outcome is not None:
        result["wait"] = {
            "ready": result["ready"],
            "waited": outcome.waited,
            "elapsed": round(outcome.elapsed, 1),
            "probes": outcome.probes,
        }
    if wait and not result["ready"]:
        result["failed"] = True
        parts = [str(n) for n in not_ready] + [
            f"{f['id']} on {f['object']['kind']} {f['object']['name']}: " + "; ".join(f["evidence"]) for f in errors
        ]
        result["msg"] = (
            "GPU sharing not in effect"
            + (f" after {outcome.elapsed:.0f}s" if outcome is not None else " (check mode: looked once)")
            + ": "
            + " | ".join(parts)
        )
    elif params["fail_on_error"] and errors:
        result["failed"] = True
        result["msg"] = (
            f"{len(errors)} GPU sharing finding(s) of severity error; first: {errors[0]['id']} on "
            f"{errors[0]['object']['kind']} {errors[0]['object']['name']}: " + "; ".join(errors[0]["evidence"])
        )
    return result


def main() -> None:
    run_module(status, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()

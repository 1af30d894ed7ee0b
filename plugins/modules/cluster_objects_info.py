#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_objects_info
short_description: Read several kinds of Kubernetes objects in one module run
version_added: 0.3.0
description:
  - Reads each of O(queries) - objects of one API version and kind, in one namespace or all, by name or by label and
    field selectors - and returns per read what C(kubernetes.core.k8s_info) returns for it (C(resources),
    C(api_found)), in the order given and by O(queries[].key).
  - One module run and one GET per read, plus one discovery GET per API group version (a kind's plural and
    scope come from the API server, as C(k8s_info) finds them), where a loop of C(k8s_info) costs a module run per
    read. The roles use it for the reads they make on every run (their objects by label, the objects their rules
    judge).
  - A kind the cluster does not serve (its CRD is not installed) gives RV(results[].api_found=false) and no
    resources; a named object that does not exist gives no resources. Any other error of the API server fails the
    module naming the read and the HTTP status (for C(403), the RBAC grant to add).
  - Read-only.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.info_module
options:
  queries:
    description: The reads, made in order.
    type: list
    elements: dict
    required: true
    suboptions:
      key:
        description:
          - Names the read's result in RV(objects) (keys are unique). Without it the result is only in RV(results).
        type: str
      api_version:
        description: The API version, C(v1) for the core group or C(<group>/<version>).
        type: str
        default: v1
      kind:
        description: The kind (C(ConfigMap), C(ServiceMonitor), ...).
        type: str
        required: true
      namespace:
        description:
          - The namespace of a namespaced kind; all namespaces when omitted. Ignored for a cluster-scoped kind.
        type: str
      name:
        description: One object by name; the selectors are then ignored.
        type: str
      label_selectors:
        description: Label selectors (C(key=value), C(key!=value), C(key in (a,b)), C(key)), all of which must match.
        type: list
        elements: str
        default: []
      field_selectors:
        description: Field selectors (C(metadata.name=x), C(spec.nodeName=n)), all of which must match.
        type: list
        elements: str
        default: []
      metadata_only:
        description:
          - Read only the objects' metadata (the API server answers C(PartialObjectMetadata) of C(meta.k8s.io/v1), as
            C(kubectl get -o name) asks) - for a read that needs names or labels of large objects, such as every
            C(CustomResourceDefinition).
        type: bool
        default: false
      skip:
        description:
          - Read nothing for this entry and return it with no resources and RV(results[].skipped=true) (the task's
            conditions stay next to each read, and the results keep their order).
        type: bool
        default: false
notes:
  - The user needs C(get) on each named object and C(list) on each kind read by selector, in the namespace read.
seealso:
  - module: kubernetes.core.k8s_info
"""

EXAMPLES = r"""
- name: Read the role's ServiceMonitors, PrometheusRules and ConfigMaps, and its Services in every namespace
  gpuops.platform.cluster_objects_info:
    queries:
      - {api_version: monitoring.coreos.com/v1, kind: ServiceMonitor, namespace: monitoring,
         label_selectors: ["app.kubernetes.io/managed-by=gpuops.platform"]}
      - {api_version: monitoring.coreos.com/v1, kind: PrometheusRule, namespace: monitoring,
         label_selectors: ["app.kubernetes.io/managed-by=gpuops.platform"]}
      - {kind: ConfigMap, namespace: monitoring, label_selectors: ["app.kubernetes.io/managed-by=gpuops.platform"]}
      - {kind: Service, label_selectors: ["app.kubernetes.io/managed-by=gpuops.platform"]}
  register: owned

- name: Every object read
  ansible.builtin.debug:
    msg: "{{ owned.results | map(attribute='resources') | flatten | map(attribute='metadata.name') }}"

- name: Read a namespace, and a ClusterPolicy only where the GPU Operator is managed
  gpuops.platform.cluster_objects_info:
    queries:
      - {key: namespace, kind: Namespace, name: monitoring}
      - {key: cluster_policy, api_version: nvidia.com/v1, kind: ClusterPolicy, skip: "{{ not nvidia }}"}
  register: read

- name: The namespace's labels
  ansible.builtin.debug:
    msg: "{{ (read.objects.namespace.resources | first | default({})).metadata.labels | default({}) }}"
"""

RETURN = r"""
results:
  description: Per query, in the order given, the read.
  returned: always
  type: list
  elements: dict
  contains:
    query:
      description: The query as given (with its defaults).
      type: dict
    resources:
      description:
        - The objects read, as the API server returns them (each with its C(apiVersion) and C(kind); with
          O(queries[].metadata_only) C(PartialObjectMetadata) ones); empty when none match, the named object does not
          exist, the kind is not served or the read was skipped.
      type: list
      elements: dict
    api_found:
      description: Whether the cluster serves the kind (false for a skipped read).
      type: bool
    skipped:
      description: Whether the read was skipped (O(queries[].skip)).
      type: bool
  sample:
    - query: {key: null, api_version: v1, kind: Namespace, name: monitoring, namespace: null, label_selectors: [],
              field_selectors: [], skip: false}
      resources: [{apiVersion: v1, kind: Namespace, metadata: {name: monitoring, labels: {}}}]
      api_found: true
      skipped: false
objects:
  description: The results of the queries that have a O(queries[].key), by key.
  returned: always
  type: dict
  sample: {namespace: {resources: [], api_found: true, skipped: false}}
api_requests:
  description: The HTTP requests made (discovery included).
  returned: always
  type: int
  sample: 3
"""

from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import (  # noqa: E402
    _k8s,
    _objects,
)

ARGUMENT_SPEC = dict(
    _k8s.auth_argument_spec(),
    queries={"type": "list", "elements": "dict", "required": True, "options": _objects.QUERY_SPEC},
)


def objects_info(ctx: Any) -> dict[str, Any]:
    queries = ctx.params["queries"]
    _objects.check_keys(queries)
    _k8s.require_client(ctx.module)
    reader = _k8s.new_reader(ctx.params)
    results = _objects.read(reader, queries)
    return {
        "changed": False,
        "results": results,
        "objects": {r["query"]["key"]: r for r in results if r["query"].get("key") is not None},
        "api_requests": reader.requests,
    }


def main() -> None:
    run_module(objects_info, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()

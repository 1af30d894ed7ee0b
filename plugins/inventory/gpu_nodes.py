# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_nodes
short_description: The GPU nodes of a live Kubernetes cluster as inventory hosts, grouped by what they are
version_added: 0.1.0
description:
  - Lists the cluster's GPU nodes (an NVIDIA or AMD vendor label, or advertised GPUs; or every node O(node_selector)
    matches) with three or four list requests whatever the node count, and adds each as a host named like its node,
    with C(ansible_host) its address.
  - "Groups: C(gpu_nodes) (all of them, the name the collection's playbooks use), C(gpu_vendor_<vendor>),
    C(gpu_product_<product>) (from C(nvidia.com/gpu.product) without the C(-SHARED) or C(-MIG-<profile>) that GPU
    sharing appends, or C(amd.com/gpu.product-name); lower case, other characters as C(_)), C(mig_capable)
    (C(nvidia.com/mig.capable=true)), C(rdma_capable) (an NVIDIA/Mellanox NIC found by NFD, or C(rdma/*) resources
    advertised), C(sharing_<model>) (the GPU sharing model the node runs: C(exclusive), C(time_slicing), C(mps),
    C(mig), C(dra), C(unknown)), C(sharing_pool_<entry>) (the time-slicing or MPS pool, the node's
    C(nvidia.com/device-plugin.config) entry), C(not_ready) and C(cordoned)."
  - "Host variable C(gpuops_node): C(vendor), C(product) (the label), C(model) (without the sharing suffix),
    C(gpus), C(ready), C(unschedulable), C(allocatable) (GPU resources), C(sharing) (C(model), C(detail)) and
    C(labels) (all of the node's labels) - for O(compose), O(groups) and O(keyed_groups)."
  - Used as an AWX/Automation Platform inventory source (docs/awx.md). Results can be cached (O(cache)).
author:
  - gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - constructed
  - inventory_cache
options:
  plugin:
    description: The name of this plugin; the file must end in C(gpu_nodes.yml) or C(gpu_nodes.yaml).
    type: str
    required: true
    choices: [gpuops.platform.gpu_nodes]
  kubeconfig:
    description:
      - Path to a kubeconfig. Without it (and without O(host)) the default configuration is loaded
        (C(KUBECONFIG) or C(~/.kube/config)), or the in-cluster service account when there is none.
    type: path
    env:
      - name: K8S_AUTH_KUBECONFIG
  context:
    description: A context of the kubeconfig other than its current context.
    type: str
    env:
      - name: K8S_AUTH_CONTEXT
  host:
    description: URL of the API server (overrides the kubeconfig's server).
    type: str
    env:
      - name: K8S_AUTH_HOST
  api_key:
    description: Bearer token for the API server.
    type: str
    env:
      - name: K8S_AUTH_API_KEY
  validate_certs:
    description: Whether to verify the API server's certificate (default - the kubeconfig's setting).
    type: bool
    env:
      - name: K8S_AUTH_VERIFY_SSL
  ca_cert:
    description: CA certificate of the API server.
    type: path
    env:
      - name: K8S_AUTH_SSL_CA_CERT
  client_cert:
    description: Client certificate.
    type: path
    env:
      - name: K8S_AUTH_CERT_FILE
  client_key:
    description: Key of O(client_cert).
    type: path
    env:
      - name: K8S_AUTH_KEY_FILE
  operator_namespace:
    description: Namespace of the NVIDIA GPU Operator (where the device-plugin ConfigMap the ClusterPolicy names is).
    type: str
    default: gpu-operator
  node_selector:
    description:
      - A label selector (C(a=b,c!=d,e,!f,g in (x,y))); every node it matches is a host, GPU labels or not.
      - Without it, every node with GPU labels or advertised GPUs.
    type: str
  address_type:
    description: The node address used as C(ansible_host); C(InternalIP) when the node has no address of this type.
    type: str
    default: InternalIP
    choices: [InternalIP, ExternalIP, Hostname]
notes:
  - The user needs C(list) on nodes, C(clusterpolicies.nvidia.com), C(resourceslices.resource.k8s.io) and ConfigMaps
    in O(operator_namespace).
  - A kubeconfig that does not exist, does not parse, or lacks the current or the requested context is an error
    before any request and before the cache; so is a cluster that does not answer, without a cached inventory.
    Ansible makes a plugin's error a warning and goes on with an empty inventory unless C([inventory]
    unparsed_is_failed) (and C(any_unparsed_is_failed) for one source among several) is set, as the collection's
    C(ansible.cfg) does.
  - With O(cache), the inventory is cached per source file, cluster (its server and context) and selection
    (O(node_selector), O(operator_namespace), O(address_type)); a cluster's cached inventory answers while its API
    server is unreachable, never for another cluster.
"""

EXAMPLES = r"""
# inventories/cluster/gpu_nodes.yml
plugin: gpuops.platform.gpu_nodes
kubeconfig: ~/.kube/prod-gpu
keyed_groups:
  - key: gpuops_node.labels['topology.kubernetes.io/zone'] | default('none')
    prefix: zone
compose:
  gpus: gpuops_node.gpus
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/gpuops-inventory
cache_timeout: 300
"""

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from typing import Any  # noqa: E402

import yaml  # noqa: E402
from ansible.errors import AnsibleParserError  # noqa: E402
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _label_selectors, _node_inventory  # noqa: E402

_AUTH = ("kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert", "client_cert", "client_key")
_SELECTION = ("node_selector", "operator_namespace", "address_type")
_FIX = (
    "Fix: set the plugin's kubeconfig option or K8S_AUTH_KUBECONFIG (AWX: the kubeconfig credential of the inventory "
    "source) to the kubeconfig of the cluster, and context or K8S_AUTH_CONTEXT to one of its contexts."
)


def _fail(message: str) -> AnsibleParserError:
    return AnsibleParserError(f"{InventoryModule.NAME}: {message}. {_FIX}")


def _entry(entries: Any, name: str | None, kind: str) -> dict[str, Any] | None:
    """The `kind` mapping of the first kubeconfig entry named `name` (kubectl's merge: the first one wins)."""
    for entry in entries:
        if entry.get("name") == name:
            return entry.get(kind) if isinstance(entry.get(kind), dict) else None
    return None


def cluster_of(params: Mapping[str, Any]) -> tuple[Any, Any, str]:
    """(server, context, words naming them) of the connection the options describe, read from the options and the
    kubeconfig without contacting the cluster: the cache key, and the words that name the cluster in errors. A
    kubeconfig that is missing or unreadable, or lacks the context or its cluster, is an AnsibleParserError naming
    the file and the option: the connection would fail as well, and a cached inventory must not answer for it."""
    server: Any
    kubeconfig, context, host = params.get("kubeconfig"), params.get("context"), params.get("host")
    if host and not kubeconfig and not context:
        return host, None, host
    if kubeconfig:
        paths, option = [kubeconfig], "option kubeconfig, K8S_AUTH_KUBECONFIG"
    else:
        env = os.environ.get("KUBECONFIG", "")
        listed = [os.path.expanduser(p) for p in env.split(os.pathsep) if p] or [os.path.expanduser("~/.kube/config")]
        option = "KUBECONFIG" if env else "the default; option kubeconfig, K8S_AUTH_KUBECONFIG unset"
        paths = [p for p in listed if os.path.exists(p)]  # kubectl skips the missing files of KUBECONFIG
        if not paths:
            in_cluster = os.environ.get("KUBERNETES_SERVICE_HOST")
            if in_cluster and not context:  # the pod's service account (the client's in-cluster configuration)
                server = f"https://{in_cluster}:{os.environ.get('KUBERNETES_SERVICE_PORT', '443')}"
                return server, None, f"{server}, in-cluster"
            raise _fail(f"kubeconfig {os.pathsep.join(listed)} ({option}) does not exist, and no host option is set")
    named = f"kubeconfig {os.pathsep.join(paths)} ({option})"
    docs = []
    for path in paths:
        if not os.path.isfile(path):
            raise _fail(f"{named} does not exist")
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise _fail(f"{named} is not a readable kubeconfig: {exc}") from None
        if not isinstance(doc, dict):
            raise _fail(f"{named} is not a readable kubeconfig: a mapping was expected, not {type(doc).__name__}")
        docs.append(doc)
    # several files merge as kubectl merges them: the first current-context set, the first entry of each name
    contexts = [e for d in docs for e in (d.get("contexts") or []) if isinstance(e, dict)]
    clusters = [e for d in docs for e in (d.get("clusters") or []) if isinstance(e, dict)]
    context = context or next((d["current-context"] for d in docs if d.get("current-context")), None)
    if not context:
        raise _fail(f"{named} has no current-context and no context option (K8S_AUTH_CONTEXT) is set")
    ctx = _entry(contexts, context, "context")
    if ctx is None:
        names = ", ".join(str(e.get("name")) for e in contexts) or "none"
        raise _fail(f"{named} has no context {context!r} (contexts: {names})")
    server = host or (_entry(clusters, ctx.get("cluster"), "cluster") or {}).get("server")
    if not server:
        raise _fail(f"{named}: context {context!r} names cluster {ctx.get('cluster')!r}, which has no server")
    return server, context, f"{server}, context {context} of kubeconfig {os.pathsep.join(paths)}"


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "gpuops.platform.gpu_nodes"

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith(("gpu_nodes.yml", "gpu_nodes.yaml"))

    def _read_nodes(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The hosts, from the cluster's lists (three or four GETs)."""
        selector = _label_selectors.parse_selector(self.get_option("node_selector"))
        raw = _node_inventory.collect(_k8s.new_reader(params), self.get_option("operator_namespace"))
        return _node_inventory.hosts(raw, selector, self.get_option("address_type"))

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        params = {k: self.get_option(k) for k in _AUTH}
        server, context, where = cluster_of(params)  # before the cache: a wrong kubeconfig never gets a cached answer
        # the cache holds the inventory of one cluster (server and context) and one selection, not of this file alone
        selection = [server, context, *(self.get_option(k) for k in _SELECTION)]
        digest = hashlib.sha256(json.dumps(selection).encode(), usedforsecurity=False).hexdigest()[:12]
        key = f"{self.get_cache_key(path)}_{digest}"
        use_cache = self.get_option("cache") and cache
        found = None
        if use_cache:
            try:
                found = self._cache[key]
            except KeyError:
                found = None
        if found is None:
            try:
                found = self._read_nodes(params)
            except GpuOpsError as exc:
                raise AnsibleParserError(f"{self.NAME} ({where}): {exc}") from None
            if self.get_option("cache"):
                self._cache[key] = found
        strict = self.get_option("strict")
        for host in found:
            name = host["name"]
            for group in host["groups"]:
                self.inventory.add_group(group)
                self.inventory.add_host(name, group=group)
            if host["address"]:
                self.inventory.set_variable(name, "ansible_host", host["address"])
            for var, value in host["vars"].items():
                self.inventory.set_variable(name, var, value)
            hostvars = self.inventory.get_host(name).get_vars()
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)

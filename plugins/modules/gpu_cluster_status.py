#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_cluster_status
short_description: Report GPU node readiness and operator state, and diagnose what is not ready
version_added: 0.1.0
description:
  - Reads the cluster with a constant number of list requests, whatever the number of nodes (no per-node
    request). Nodes, pods and DaemonSets of O(operator_namespace), pods of O(amd_namespace), ClusterPolicies
    (C(nvidia.com/v1)) and DeviceConfigs (C(amd.com/v1alpha1)) in O(amd_namespace) - six requests, five when both
    namespaces are the same. The count is returned as RV(api_requests).
  - Returns, per GPU node, the vendor and product labels, the allocatable C(nvidia.com/gpu), C(nvidia.com/mig-*)
    and C(amd.com/gpu) resources and the operand pods with their phase, readiness and restarts; the state of the
    operator custom resources; a summary; and a diagnosis.
  - The diagnosis maps symptoms to their documented root causes. Each finding names the object, the evidence,
    the cause and the fix. O(host_facts) refines causes that only the host can tell (nouveau, host driver,
    kernel headers, NVSwitch and fabric manager).
  - A custom resource definition that is not installed is reported in the result (RV(summary.cluster_policy) is
    V(not installed)), not as an error.
  - With O(network), the network fabric too (RV(network)) - four more list requests, whatever the number of nodes.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._k8s_auth
  - gpuops.platform._attributes.info_module
options:
  operator_namespace:
    description: Namespace of the NVIDIA GPU Operator and its operand DaemonSets.
    type: str
    default: gpu-operator
  amd_namespace:
    description: Namespace of the AMD GPU Operator, its operand pods and its DeviceConfigs.
    type: str
    default: kube-amd-gpu
  node_selector:
    description:
      - Kubernetes label selector choosing the GPU nodes to report, for example V(nvidia.com/gpu.present=true)
        or V(pool in (train,infer\),!maintenance).
      - Evaluated on the one node list, client-side.
      - When not set, GPU nodes are those labelled C(nvidia.com/gpu.present=true),
        C(feature.node.kubernetes.io/pci-10de.present=true) (or C(pci-0302_10de)/C(pci-0300_10de)),
        C(feature.node.kubernetes.io/amd-gpu=true) or C(feature.node.kubernetes.io/pci-1002.present=true), and
        those advertising C(nvidia.com/gpu), C(nvidia.com/mig-*) or C(amd.com/gpu).
    type: str
  host_facts:
    description:
      - Host facts by host name, as set by M(gpuops.platform.gpu_host_facts) (C(ansible_facts.gpuops_host)); see
        the examples for building it from C(hostvars).
      - A key matches a node by name or by short name (first DNS label). A value may also be a dict that holds
        the facts under C(gpuops_host).
      - Used keys are C(nouveau.loaded), C(nouveau.in_use), C(nvidia_driver.loaded), C(nvidia_driver.version),
        C(kernel.release), C(kernel.headers_installed), C(secure_boot.state), C(nvswitches),
        C(fabricmanager.active) and C(fabricmanager.version).
    type: dict
  vendor:
    description:
      - Judge only the GPU nodes of these vendors, their operand and operator pods, and only the rules about
        these vendors' operators (the ClusterPolicy for V(nvidia), the DeviceConfig for V(amd)).
      - Each operator role validates its own vendor's nodes, so a mixed cluster's first converge does not flag
        AMD nodes before the AMD role has run. When not set, every vendor is judged (C(playbooks/validate.yml),
        C(playbooks/diagnose.yml)).
    type: list
    elements: str
    choices: [nvidia, amd]
  wait:
    description:
      - Wait until the objects in O(wait.objects) and (O(wait.nodes)) the GPU nodes are ready, reading the
        cluster again after 1, 2, 4... seconds, at most every O(wait.sleep) seconds, for at most O(wait.timeout)
        seconds; then diagnose the last look.
      - Readiness per kind - C(ClusterPolicy) C(status.state) is V(ready); C(DeviceConfig) the device plugin is
        available on every node matching its selector; C(DaemonSet) scheduled on at least one node with every
        pod updated and ready; C(Deployment) C(spec.replicas) available and updated; C(NicClusterPolicy)
        C(status.state) is V(ready) and every section of its spec has its C(status.appliedStates) entry V(ready);
        C(MacvlanNetwork), C(HostDeviceNetwork), C(IPoIBNetwork) C(status.state) is V(ready); C(ClusterQueue) and
        C(LocalQueue) (Kueue, C(kueue.x-k8s.io/v1beta2)) their C(Active) condition is C(True); a GPU node is
        C(Ready) and advertises at least one GPU (or its operands are disabled by
        C(nvidia.com/gpu.deploy.operands=false)).
      - At the timeout the module fails, naming every object (and node) not ready and the condition it does not
        meet, followed by the error findings that explain why; RV(wait) holds the same as data.
      - In check mode the cluster is looked at once, without waiting.
      - When not set, the module reports the cluster as it is, without waiting.
    type: dict
    suboptions:
      timeout:
        description: Seconds to wait at most.
        type: int
        default: 600
      sleep:
        description: The longest pause between two looks, in seconds (the first pauses are 1, 2, 4... seconds).
        type: int
        default: 5
      nodes:
        description: Also wait for the GPU nodes (those selected by O(node_selector) and O(vendor)).
        type: bool
        default: true
      objects:
        description:
          - Objects to wait for. Without O(wait.objects[].name), every object of the kind in the namespace (that
            matches O(wait.objects[].label_selector)) must be ready, and at least one must exist.
        type: list
        elements: dict
        default: []
        suboptions:
          kind:
            description: Kind of the object.
            type: str
            required: true
            choices:
              [ClusterPolicy, ClusterQueue, DaemonSet, DeviceConfig, Deployment, HostDeviceNetwork, IPoIBNetwork,
               LocalQueue, MacvlanNetwork, NicClusterPolicy, SriovNetworkNodeState]
          name:
            description: Name of the object; all of the kind when not set.
            type: str
          namespace:
            description:
              - Namespace of a namespaced kind. Defaults to O(amd_namespace) for C(DeviceConfig) and to
                O(operator_namespace) for the other namespaced kinds; ignored for C(ClusterPolicy).
            type: str
          label_selector:
            description: Kubernetes label selector the objects must match.
            type: str
      sriov_policies:
        description:
          - SriovNetworkNodePolicy objects (as applied) whose effect to wait for as well. Each must be named in the
            C(spec.interfaces[].vfGroups[].policyName) of a SriovNetworkNodeState in O(wait.sriov_namespace) (the
            operator writes a policy there about a second after it changes; a failed state ends this part, and a
            C(SriovNetworkNodeState) entry in O(wait.objects) reports it), and every node a policy's
            C(nodeSelector) selects must have the policy's resource allocatable.
        type: list
        elements: dict
        default: []
      sriov_policies_removed:
        description:
          - SriovNetworkNodePolicy objects (as they were applied) just deleted, whose undoing to wait for - no
            SriovNetworkNodeState in O(wait.sriov_namespace) names them in C(spec.interfaces[].vfGroups[].policyName)
            any more, and no PF they select (on a node their C(nodeSelector) selects; externally managed PFs aside)
            still reports VFs that no remaining policy configures. With a C(SriovNetworkNodeState) entry in
            O(wait.objects), every state is also synced again (C(Succeeded), no drain under way).
        type: list
        elements: dict
        default: []
      sriov_namespace:
        description:
          - Namespace of the SriovNetworkNodeStates for O(wait.sriov_policies) and O(wait.sriov_policies_removed);
            defaults to O(operator_namespace).
        type: str
      sriov_resource_prefix:
        description: Prefix of the resources of O(wait.sriov_policies) (C(openshift.io) for the standalone chart).
        type: str
        default: openshift.io
  network:
    description:
      - Also report and diagnose the network fabric of the NVIDIA Network Operator and the SR-IOV Network Operator,
        with four more list requests whatever the number of nodes - pods in O(network.namespace), NicClusterPolicies
        (C(mellanox.com/v1alpha1)), SriovNetworkNodeStates (C(sriovnetwork.openshift.io/v1)) in
        O(network.sriov_namespace), and PodDisruptionBudgets (cluster-wide, to name what blocks a drain). Three when
        O(network.namespace) is O(operator_namespace).
      - Reported per node with an NVIDIA NIC (label C(feature.node.kubernetes.io/pci-15b3.present=true)), the label
        C(network.nvidia.com/operator.mofed.wait), RDMA or SR-IOV resources, or a SriovNetworkNodeState, that
        matches O(node_selector) when given; see RV(network).
      - Adds the diagnosis rows V(nicclusterpolicy-ignored), V(nicclusterpolicy-not-ready),
        V(nicclusterpolicy-not-reconciled), V(network-operator-not-installed), V(ofed-driver-crashloop),
        V(ofed-driver-not-ready), V(rdma-resource-missing), V(sriov-resource-missing), V(sriov-vfs-above-limit),
        V(sriov-sync-failed), V(sriov-drain-blocked) and V(sriov-sync-in-progress). O(host_facts) C(nics),
        C(kernel) and C(secure_boot) narrow their causes.
      - When not set, nothing of the network is read (the result has no RV(network)). V(peermem-not-loaded) is
        judged either way, from the ClusterPolicy and the driver pods.
    type: dict
    suboptions:
      namespace:
        description:
          - Namespace of the NVIDIA Network Operator and its operand DaemonSets (C(mofed-*-ds), device plugins).
        type: str
        default: nvidia-network-operator
      sriov_namespace:
        description:
          - Namespace of the SR-IOV Network Operator, where its SriovNetworkNodeStates are - the standalone chart's
            namespace, or O(network.namespace) when the operator bundled in the Network Operator chart is used.
        type: str
        default: sriov-network-operator
  sharing:
    description:
      - Also report the GPU sharing model each NVIDIA node runs (RV(nodes[].sharing)), read from the cluster alone -
        ResourceSlices of the NVIDIA DRA driver, the C(nvidia.com/mig.config) label, and the device-plugin config
        entry that the node's C(nvidia.com/device-plugin.config) label (or the ClusterPolicy's
        C(devicePlugin.config.default)) names in the ConfigMap the ClusterPolicy names.
      - One more list request (ResourceSlices of C(resource.k8s.io/v1), none when not served), two when the
        ClusterPolicy names a ConfigMap (ConfigMaps in O(operator_namespace)).
      - The pools and what they should advertise are the M(gpuops.platform.gpu_sharing_status) module's.
    type: bool
    default: false
  workloads:
    description:
      - Also list the GPU workloads (RV(gpu_workloads)) - pods in any namespace but O(operator_namespace) and
        O(amd_namespace), not finished, that request NVIDIA or AMD GPU resources or carry DRA resource claims - with
        one more list request (pods in all namespaces). C(playbooks/uninstall.yml) refuses to run while there are any.
    type: bool
    default: false
  batch:
    description:
      - Also diagnose the batch layer - why a queued job does not start - from Kueue's Workloads, LocalQueues,
        ClusterQueues and ResourceFlavors (C(kueue.x-k8s.io/v1beta2)), Volcano's Queues and PodGroups
        (C(scheduling.volcano.sh/v1beta1)), KAI Scheduler's Queues (C(scheduling.run.ai/v2)) - each only when
        installed - the namespaces and all pods. Nine more list requests.
      - Findings C(kueue-local-queue-missing), C(kueue-cluster-queue-missing),
        C(kueue-cluster-queue-selects-no-namespace) (a nil C(namespaceSelector) selects no namespace),
        C(kueue-flavor-matches-no-node), C(pod-scheduler-missing) (pods naming a scheduler that does not run - no
        C(PodScheduled) condition 30 s after creation), C(kueue-quota-above-capacity) (a warning with the numbers),
        C(volcano-queue-missing), C(volcano-queue-closed) (a waiting PodGroup's queue), C(kai-queue-missing) and
        C(kai-queue-not-leaf) (a pending pod's C(kai.scheduler/queue) label).
    type: bool
    default: false
  fail_on_error:
    description:
      - Fail when the diagnosis has a finding of severity V(error). The result is returned either way.
    type: bool
    default: false
  return_nodes:
    description:
      - Return RV(nodes), every GPU node's view (a few KB per node). V(false) returns it empty, for a readiness wait
        that reads only RV(wait), RV(summary) and RV(diagnosis) - on a cluster of many nodes, most of the task's time
        went to carrying the views back to the controller. The nodes are read and diagnosed either way.
    type: bool
    default: true
notes:
  - GPU Operator facts used (v26.7.0) - the operator reconciles the oldest ClusterPolicy (creation time, then name)
    and sets the others to V(ignored); its operand DaemonSets are C(nvidia-driver-daemonset),
    C(nvidia-container-toolkit-daemonset), C(nvidia-device-plugin-daemonset), C(gpu-feature-discovery),
    C(nvidia-dcgm-exporter), C(nvidia-mig-manager) and C(nvidia-operator-validator), whose init containers run
    C(driver-validation), C(toolkit-validation), C(cuda-validation) and C(plugin-validation) in that order.
  - The user needs C(list) on nodes, on pods and DaemonSets in O(operator_namespace), on pods in O(amd_namespace),
    on C(clusterpolicies.nvidia.com) and on C(deviceconfigs.amd.com); with O(sharing), C(list) on
    C(resourceslices.resource.k8s.io) and on ConfigMaps in O(operator_namespace); with O(workloads), C(list) on pods
    in all namespaces; with O(wait.objects), C(list) on
    their kinds in their namespaces; with O(network), C(list) on pods in O(network.namespace), on
    C(nicclusterpolicies.mellanox.com), on C(sriovnetworknodestates.sriovnetwork.openshift.io) in
    O(network.sriov_namespace) and on C(poddisruptionbudgets.policy) in all namespaces.
  - Network Operator facts used (v26.4.1) - only the NicClusterPolicy named C(nic-cluster-policy) is reconciled, any
    other gets C(status.state) V(ignore); the driver DaemonSet is C(mofed-<os><version>-ds); nodes with an NVIDIA NIC
    carry C(network.nvidia.com/operator.mofed.wait) (V(true) until the driver is ready there). GPU Operator - with
    C(driver.rdma.enabled) the driver pod runs the container C(nvidia-peermem-ctr).
seealso:
  - module: gpuops.platform.gpu_host_facts
"""

EXAMPLES = r"""
- name: Report GPU readiness
  gpuops.platform.gpu_cluster_status:
    kubeconfig: ~/.kube/config
  register: gpu_status

- name: Show what is wrong and how to fix it
  ansible.builtin.debug:
    msg: "{{ item.node }}: {{ item.cause }} -> {{ item.fix }}"
  loop: "{{ gpu_status.diagnosis }}"

- name: Diagnose with host facts (gathered on the GPU hosts by gpu_host_facts) and fail on errors
  gpuops.platform.gpu_cluster_status:
    host_facts: "{{ dict(gpu_hosts | zip(gpu_hosts | map('extract', hostvars, ['ansible_facts', 'gpuops_host']))) }}"
    fail_on_error: true
  vars:
    gpu_hosts: "{{ groups['gpu_nodes'] }}"

- name: Wait up to 15 minutes for the ClusterPolicy and the NVIDIA GPU nodes, judging only NVIDIA nodes
  gpuops.platform.gpu_cluster_status:
    vendor: [nvidia]
    wait:
      timeout: 900
      objects:
        - {kind: ClusterPolicy, name: cluster-policy}
    fail_on_error: true

- name: Wait for the NFD workloads of a release (no GPU node wait, no node views returned)
  gpuops.platform.gpu_cluster_status:
    return_nodes: false
    wait:
      nodes: false
      objects:
        - {kind: DaemonSet, namespace: node-feature-discovery, label_selector: app.kubernetes.io/instance=nfd}
        - {kind: Deployment, namespace: node-feature-discovery, label_selector: app.kubernetes.io/instance=nfd}

- name: GPU and network fabric, with the bundled SR-IOV operator in the Network Operator's namespace
  gpuops.platform.gpu_cluster_status:
    network:
      namespace: nvidia-network-operator
      sriov_namespace: nvidia-network-operator
    fail_on_error: true

- name: Only the training pool
  gpuops.platform.gpu_cluster_status:
    node_selector: "pool=train"
    operator_namespace: nvidia-gpu-operator
"""

RETURN = r"""
nodes:
  description: The GPU nodes, sorted by name (empty with O(return_nodes=false)).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
    vendor:
      description: V(nvidia), V(amd), or null for a node chosen by O(node_selector) without GPU labels.
      type: str
    product:
      description: C(nvidia.com/gpu.product) or C(amd.com/gpu.product-name) label, null when not labelled.
      type: str
      sample: NVIDIA-H100-80GB-HBM3
    ready:
      description: Node condition C(Ready) is C(True).
      type: bool
    ready_reason:
      description: Reason of the C(Ready) condition.
      type: str
    ready_message:
      description: Message of the C(Ready) condition.
      type: str
    unschedulable:
      description: The node is cordoned.
      type: bool
    scheduling:
      description:
        - Whether work is scheduled on the node (the SCHEDULING column of C(playbooks/diagnose.yml)); the findings
          C(node-cordoned) and C(node-tainted) judge it.
      type: dict
      contains:
        schedulable:
          description: Not cordoned, and no NoSchedule/NoExecute taint the GPU stack does not tolerate.
          type: bool
        cordoned:
          description: The node is cordoned (C(spec.unschedulable)).
          type: bool
        cordoned_by:
          description:
            - Who cordoned the node, when the node says so - V(onboarding) (annotation
              C(gpuops.platform/onboarding-cordoned)), V(driver-upgrade) (the GPU Operator's
              C(nvidia.com/gpu-driver-upgrade-state) between cordon-required and uncordon-required), V(sriov-drain)
              (the SR-IOV config daemon's drain) - or null.
          type: str
        marker:
          description: The label or annotation that says who cordoned the node, or null.
          type: str
        upgrade_state:
          description: The node's C(nvidia.com/gpu-driver-upgrade-state) label, or null.
          type: str
        cordoned_before_upgrade:
          description: The driver upgrade controller found the node cordoned (it leaves such a node cordoned).
          type: bool
        taints:
          description:
            - The NoSchedule/NoExecute taints the GPU stack does not tolerate (all but C(nvidia.com/gpu:NoSchedule),
              C(amd.com/gpu:NoSchedule), on NVIDIA nodes those the device-plugin DaemonSet tolerates, and the node
              lifecycle controller's C(node.kubernetes.io/*) taints), as C(key=value:Effect).
          type: list
          elements: str
        summary:
          description: The table's cell.
          type: str
          sample: cordoned (onboarding)
    problems:
      description:
        - Node conditions other than C(Ready) whose status is C(True) (C(MemoryPressure), C(DiskPressure),
          node-problem-detector conditions...), each with C(type), C(reason) and C(message).
      type: list
      elements: dict
    kernel:
      description: Kernel version from the node's status.
      type: str
    kubelet_version:
      description: Kubelet version from the node's status.
      type: str
    labels:
      description: GPU-related labels (C(nvidia.com/*), C(amd.com/*), C(beta.amd.com/*), NFD GPU PCI labels).
      type: dict
      sample: {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    allocatable:
      description: Allocatable GPU resources (C(nvidia.com/gpu), C(nvidia.com/gpu.shared), C(nvidia.com/mig-*),
        C(amd.com/gpu)), integers.
      type: dict
      sample: {"nvidia.com/gpu": 8}
    capacity:
      description: Capacity of the same resources.
      type: dict
    gpus:
      description: Allocatable C(nvidia.com/gpu) + C(nvidia.com/mig-*) + C(amd.com/gpu).
      type: int
    host_facts:
      description: Whether O(host_facts) held facts for this node.
      type: bool
    sharing:
      description:
        - With O(sharing), on NVIDIA nodes (and nodes with DRA ResourceSlices) - the sharing model the node runs.
      returned: when O(sharing) is true
      type: dict
      contains:
        model:
          description:
            - V(exclusive), V(time_slicing), V(mps), V(mig), V(dra), or V(unknown) when the config entry the node
              names is missing from the ConfigMap or does not parse (the device plugin fails on that node).
          type: str
        detail:
          description: The config entry and its replicas, the MIG config and its state, or the DRA devices.
          type: str
          sample: ts-l40s x4
        advertised:
          description: The GPU resources the node advertises (allocatable), integers.
          type: dict
          sample: {"nvidia.com/gpu.shared": 16}
        summary:
          description: Model, detail and advertised resources in one line (the readiness table's SHARING column).
          type: str
          sample: "time_slicing ts-l40s x4: nvidia.com/gpu.shared=16"
    operands:
      description: Operand pods on the node (pods of DaemonSets in O(operator_namespace) and O(amd_namespace)).
      type: list
      elements: dict
      contains:
        name:
          description: Pod name.
          type: str
        component:
          description: Owning DaemonSet (or C(app) label), for example V(nvidia-driver-daemonset).
          type: str
        phase:
          description: Pod phase.
          type: str
        state:
          description:
            - V(Running), V(NotReady), V(CrashLoopBackOff), V(Init) (an init container has not completed),
              V(Unschedulable), V(Pending), V(Terminating), a container waiting reason such as
              V(ImagePullBackOff), or the phase.
          type: str
        ready:
          description: Running with condition C(Ready) C(True).
          type: bool
        restarts:
          description: Restarts of all containers and init containers.
          type: int
        container:
          description: The container the state is about (crashing, not ready, or the init step).
          type: str
        init_step:
          description: For a pending pod, the first init container not terminated successfully.
          type: str
        reason:
          description: Waiting reason, scheduling reason or pod reason.
          type: str
        message:
          description: The matching message (last exit code and reason for a crash loop).
          type: str
  sample:
    - name: dgx-h100-0
      vendor: nvidia
      product: NVIDIA-H100-80GB-HBM3
      ready: true
      allocatable: {"nvidia.com/gpu": 8}
      gpus: 8
      operands:
        - {"name": "nvidia-driver-daemonset-x7k2p", "component": "nvidia-driver-daemonset", "phase": "Running",
           "state": "Running", "ready": true, "restarts": 0}
operator:
  description: Pods and DaemonSets of O(operator_namespace).
  returned: always
  type: dict
  contains:
    namespace:
      description: O(operator_namespace).
      type: str
    pods:
      description:
        - Operator pods (labels C(app=gpu-operator) or C(app.kubernetes.io/component=gpu-operator); AMD controller
          manager C(control-plane=controller-manager) in O(amd_namespace)), with the operand pod keys plus
          C(node) and C(namespace).
      type: list
      elements: dict
    daemonsets:
      description:
        - DaemonSets with C(name), C(namespace), C(node_selector), C(desired), C(ready), C(available) and
          C(misscheduled).
      type: list
      elements: dict
cluster_policies:
  description: NVIDIA ClusterPolicies.
  returned: always
  type: dict
  contains:
    installed:
      description: The ClusterPolicy CRD is installed.
      type: bool
    active:
      description: Name of the ClusterPolicy the operator reconciles (the oldest), null when none.
      type: str
    objects:
      description:
        - Oldest first, each with C(name), C(state) (V(ready), V(notReady), V(ignored), null before the first
          reconcile), C(namespace) (the operator's namespace, from C(status.namespace)), C(created), C(active),
          C(conditions) (C(type), C(status), C(reason), C(message), C(lastTransitionTime)) and C(spec) (so a
          landing check needs no second read).
      type: list
      elements: dict
device_configs:
  description: AMD DeviceConfigs in O(amd_namespace).
  returned: always
  type: dict
  contains:
    installed:
      description: The DeviceConfig CRD is installed.
      type: bool
    objects:
      description:
        - Each with C(name), C(namespace), C(selector), C(device_plugin), C(driver), C(metrics_exporter)
          (C(nodesMatchingSelectorNumber), C(desiredNumber), C(availableNumber)), C(node_module_status),
          C(conditions) and C(spec).
      type: list
      elements: dict
summary:
  description: Counts and overall states.
  returned: always
  type: dict
  contains:
    nodes_total:
      description: All nodes in the cluster.
      type: int
    gpu_nodes:
      description: GPU nodes reported.
      type: int
    gpu_nodes_by_vendor:
      description: GPU nodes per vendor.
      type: dict
    gpu_nodes_ready:
      description: GPU nodes that are Ready and advertise at least one GPU.
      type: int
    allocatable:
      description: Allocatable GPU resources summed over the GPU nodes.
      type: dict
    operand_pods:
      description: Operand pods in both namespaces.
      type: int
    operand_pods_ready:
      description: Operand pods that are ready.
      type: int
    cluster_policy:
      description: State of the active ClusterPolicy, or V(not installed) when the CRD is missing.
      type: str
    cluster_policies:
      description: Number of ClusterPolicies.
      type: int
    device_config:
      description: V(installed), V(none) (CRD present, no object) or V(not installed).
      type: str
    device_configs:
      description: Number of DeviceConfigs.
      type: int
    findings:
      description: Number of findings per severity.
      type: dict
      sample: {"error": 1, "warning": 0, "info": 0}
    healthy:
      description: No finding of severity V(error).
      type: bool
diagnosis:
  description: Findings, errors first.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description:
        - Rule id. V(gpu-resource-missing), V(driver-crashloop), V(validator-init-stuck),
          V(operand-pending-labels), V(operand-pending), V(operand-crashloop), V(operator-crashloop),
          V(operator-not-running), V(operator-namespace-mismatch), V(clusterpolicy-ignored), V(clusterpolicy-not-ready),
          V(clusterpolicy-not-reconciled), V(host-driver-conflict), V(node-not-ready), V(node-condition),
          V(nvidia-operator-not-installed), V(amd-operator-not-installed), V(deviceconfig-no-nodes),
          V(deviceconfig-not-ready), V(amd-driver-install-failed), V(peermem-not-loaded), and with O(network) the
          network rows listed there.
      type: str
    severity:
      description: V(error), V(warning) or V(info).
      type: str
    object:
      description: The object to act on, C(kind), C(namespace) (null for cluster-scoped) and C(name).
      type: dict
    node:
      description: The node concerned, null for cluster-wide findings.
      type: str
    evidence:
      description: What was observed.
      type: list
      elements: str
    cause:
      description: The documented root cause.
      type: str
    fix:
      description: What to do.
      type: str
  sample:
    - id: driver-crashloop
      severity: error
      object: {"kind": "Pod", "namespace": "gpu-operator", "name": "nvidia-driver-daemonset-x7k2p"}
      node: dgx-h100-0
      evidence: ["pod gpu-operator/nvidia-driver-daemonset-x7k2p is CrashLoopBackOff (container nvidia-driver-ctr)",
                 "host facts: nouveau loaded and in use"]
      cause: nouveau is loaded on the host and holds the GPUs, so nvidia.ko cannot load
      fix: blacklist nouveau (gpuops.platform.nouveau_blacklist), rebuild the initramfs and reboot the node
network:
  description: The network fabric; only returned when O(network) is set.
  returned: when O(network) is set
  type: dict
  contains:
    namespace:
      description: O(network.namespace).
      type: str
    sriov_namespace:
      description: O(network.sriov_namespace).
      type: str
    nic_cluster_policies:
      description:
        - C(installed) (the CRD is served), C(active) (V(nic-cluster-policy) when it exists, else null) and
          C(objects), by name, each with C(name), C(state) (V(ready), V(notReady), V(ignore), null before the first
          reconcile), C(reason), C(applied_states) (C(name), C(state), C(message) per component, for example
          V(state-OFED)), C(active) and C(spec).
      type: dict
    nodes:
      description: The network nodes, sorted by name.
      type: list
      elements: dict
      contains:
        name:
          description: Node name.
          type: str
        nic:
          description: The node has an NVIDIA NIC (C(feature.node.kubernetes.io/pci-15b3.present=true)).
          type: bool
        mofed_wait:
          description: Value of the label C(network.nvidia.com/operator.mofed.wait), null when absent.
          type: str
        unschedulable:
          description: The node is cordoned (as during an SR-IOV drain).
          type: bool
        rdma:
          description: Allocatable C(rdma/*) resources (and other RDMA shared device plugin prefixes), integers.
          type: dict
          sample: {"rdma/rdma_shared_ib": 63}
        sriov:
          description: Allocatable SR-IOV resources (C(openshift.io/*), C(nvidia.com/*) other than GPUs), integers.
          type: dict
        ofed:
          description: The DOCA/MOFED driver pod on the node (C(mofed-*) DaemonSet), with the operand pod keys, or null.
          type: dict
        sriov_state:
          description:
            - The node's SriovNetworkNodeState, or null - C(name), C(namespace), C(sync_status), C(last_sync_error),
              the drain annotations C(desired_state) and C(current_state), and C(interfaces) (C(name), C(pci_address),
              C(num_vfs_wanted) from the spec, C(num_vfs) and C(totalvfs) from the status).
          type: dict
    summary:
      description:
        - C(nic_nodes), C(rdma_nodes), C(nic_cluster_policy) (state of C(nic-cluster-policy), V(none) or
          V(not installed)), C(sriov_states), C(sriov_states_succeeded), C(ofed_pods_ready).
      type: dict
wait:
  description: How the wait of O(wait) ended; only returned when O(wait) is set.
  returned: when O(wait) is set
  type: dict
  contains:
    ready:
      description: Every object and node waited for is ready.
      type: bool
    waited:
      description: False in check mode (looked once without waiting).
      type: bool
    elapsed:
      description: Seconds waited.
      type: float
    probes:
      description: Number of looks at the cluster.
      type: int
    not_ready:
      description: What is still not ready, each with C(kind), C(namespace), C(name) and C(condition).
      type: list
      elements: dict
      sample:
        - {"kind": "ClusterPolicy", "namespace": null, "name": "cluster-policy",
           "condition": "status.state is notReady, want ready"}
    msg:
      description: The failure message naming each object and condition, when not ready.
      type: str
queues:
  description:
    - With O(batch) - one entry per Kueue ClusterQueue, flavor and resource, by ClusterQueue - the quota next to the
      usage Kueue reports; empty when Kueue is not installed.
  returned: when O(batch) is true
  type: list
  elements: dict
  contains:
    cluster_queue:
      description: ClusterQueue name.
      type: str
    cohort:
      description: Its cohort (C(cohortName)), or null.
      type: str
    flavor:
      description: ResourceFlavor name.
      type: str
    resource:
      description: Resource name, for example C(nvidia.com/gpu).
      type: str
    nominal:
      description: Nominal quota.
      type: str
    borrowing_limit:
      description: Borrowing limit, or null (no limit within the cohort).
      type: str
    lending_limit:
      description: Lending limit, or null.
      type: str
    used:
      description: In use by admitted workloads (C(status.flavorsUsage[].resources[].total)).
      type: str
    borrowed:
      description: Of that, borrowed from the cohort.
      type: str
    admitted:
      description: Admitted workloads of the ClusterQueue.
      type: int
    pending:
      description: Pending workloads of the ClusterQueue.
      type: int
gpu_workloads:
  description: With O(workloads) - the GPU workloads, sorted by namespace and name.
  returned: when O(workloads) is true
  type: list
  elements: dict
  contains:
    namespace:
      description: Namespace of the pod.
      type: str
    name:
      description: Pod name.
      type: str
    node:
      description: The node it runs on, null while it is pending.
      type: str
    phase:
      description: Pod phase.
      type: str
    resources:
      description: The GPU resources it requests (and C(resourceClaims) for DRA claims).
      type: list
      elements: str
  sample:
    - {namespace: ml, name: trainer-0, node: dgx-h100-0, phase: Running, resources: ["nvidia.com/gpu"]}
api_requests:
  description:
    - HTTP requests made to the API server; constant per look whatever the number of nodes (four more with
      O(network); one more list per kind and namespace of O(wait.objects) that the look does not already hold).
  returned: always
  type: int
  sample: 6
"""

from collections.abc import Mapping  # noqa: E402
from typing import Any  # noqa: E402

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.k8s import _k8s  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.status import _cluster_status, _readiness  # noqa: E402

ARGUMENT_SPEC = dict(
    _k8s.auth_argument_spec(),
    operator_namespace={"type": "str", "default": "gpu-operator"},
    amd_namespace={"type": "str", "default": "kube-amd-gpu"},
    node_selector={"type": "str"},
    host_facts={"type": "dict"},
    vendor={"type": "list", "elements": "str", "choices": ["nvidia", "amd"]},
    wait={
        "type": "dict",
        "options": {
            "timeout": {"type": "int", "default": 600},
            "sleep": {"type": "int", "default": 5},
            "nodes": {"type": "bool", "default": True},
            "objects": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "kind": {"type": "str", "required": True, "choices": sorted(_readiness.KINDS)},
                    "name": {"type": "str"},
                    "namespace": {"type": "str"},
                    "label_selector": {"type": "str"},
                },
            },
            "sriov_policies": {"type": "list", "elements": "dict", "default": []},
            "sriov_policies_removed": {"type": "list", "elements": "dict", "default": []},
            "sriov_namespace": {"type": "str"},
            "sriov_resource_prefix": {"type": "str", "default": "openshift.io"},
        },
    },
    network={
        "type": "dict",
        "options": {
            "namespace": {"type": "str", "default": "nvidia-network-operator"},
            "sriov_namespace": {"type": "str", "default": "sriov-network-operator"},
        },
    },
    sharing={"type": "bool", "default": False},
    workloads={"type": "bool", "default": False},
    batch={"type": "bool", "default": False},
    fail_on_error={"type": "bool", "default": False},
    return_nodes={"type": "bool", "default": True},
)


def new_waiter(params: Mapping[str, Any], check_mode: bool) -> _readiness.Waiter | _readiness.NullWaiter:
    """The waiter for O(wait): none without it, a single look in check mode."""
    wait = params.get("wait")
    if not wait or check_mode:
        return _readiness.NullWaiter()
    if wait["timeout"] < 0 or wait["sleep"] < 1:
        raise InvalidInput(
            f"wait.timeout {wait['timeout']} / wait.sleep {wait['sleep']}: the timeout must be 0 or more seconds and "
            "the sleep at least 1 second",
            wait=wait,
        )
    return _readiness.Waiter(timeout=wait["timeout"], interval=wait["sleep"])


def status(ctx: Any) -> dict[str, Any]:
    _k8s.require_client(ctx.module)
    waiter = new_waiter(ctx.params, ctx.check_mode)
    reader = _k8s.new_reader(ctx.params)
    result = dict(changed=False, **_cluster_status.gather(reader, ctx.params, waiter))
    errors = [f for f in result["diagnosis"] if f["severity"] == "error"]
    if result.get("wait") and not result["wait"]["ready"]:
        result["failed"] = True
        result["msg"] = result["wait"]["msg"]
    elif ctx.params["fail_on_error"] and errors:
        first = errors[0]
        result["failed"] = True
        result["msg"] = (
            f"{len(errors)} GPU cluster finding(s) of severity error; first: {first['id']} on "
            f"{first['object']['kind']} {first['object']['name']}: {first['cause']} -> {first['fix']}"
        )
    return result


def main() -> None:
    run_module(status, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()

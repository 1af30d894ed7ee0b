#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_host_preflight
short_description: Check a GPU host against what is planned for it, before changing anything
version_added: 0.1.0
description:
  - Compares the host (the facts of gpuops.platform.gpu_host_facts, given in O(facts) or gathered now) with what
    the roles plan for it, and returns findings, each with an C(id), a C(severity) (V(error), V(warning),
    V(info)), the C(object) it is about, the C(evidence) (values read from the host), the C(cause) and the C(fix).
  - "Rules (O(checks)): C(headers) kernel headers missing while a driver build is planned; C(nouveau) nouveau
    loaded (naming the GPUs it is bound to) or not blacklisted while an NVIDIA driver is planned; C(driver) a host
    NVIDIA driver while the GPU Operator driver container is planned; C(mofed) host MLNX_OFED/DOCA-OFED against the
    Network Operator's DOCA driver and against the GPU Operator's driver.rdma.useHostMofed; C(fabricmanager)
    NVSwitches without a running nvidia-fabricmanager of the host driver's exact version (and an NVSwitch host with
    no NVIDIA driver yet while the host driver or host_prep's fabricmanager fix is planned, an error: that fix
    cannot run before the driver); C(acs) ACS enabled above GPUs/NICs with GPUDirect (or not in the state
    host_prep_acs asks for); C(gpudirect) IOMMU translating and nvidia_peermem; C(sriov) PF resolution (netdev or
    PCI address, short forms such as C(14:00.0) accepted) and VF counts against the firmware limit; C(secure_boot)
    Secure Boot with unsigned modules planned."
  - A bad value is named by its option - C(sriov[1].pf), C(sriov[0].num_vfs), C(fix.acs_devices[2]) (with
    host_prep's variable beside it) - not only by the value.
  - Works out host_prep's plan from O(fix) (C(auto) follows the hardware facts) and returns it in RV(plan). In
    O(stage=preflight) a finding that this plan or O(planned_fixes) addresses is part of the plan (C(planned),
    at most a warning) and never fails the module. In O(stage=validate) only the concerns host_prep manages are
    checked, and the state they ask for must hold.
  - Fails when a finding that is not planned is at or above O(fail_on), with all findings in the result.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.info_module
  - gpuops.platform._attributes.facts
options:
  facts:
    description:
      - The C(gpuops_host) facts to check; gathered from the host when omitted, and then also returned as
        RV(ansible_facts) (one module run instead of M(gpuops.platform.gpu_host_facts) and this one).
    type: dict
  node_name:
    description: The host's name (inventory or Kubernetes node name), used in messages and findings.
    type: str
  stage:
    description:
      - V(preflight) checks before host_prep's fixes (planned fixes do not fail); V(validate) checks that the state
        host_prep asks for holds now.
    type: str
    choices: [preflight, validate]
    default: preflight
  checks:
    description: The rules to run; all when omitted.
    type: list
    elements: str
    choices: [headers, nouveau, driver, mofed, fabricmanager, acs, gpudirect, sriov, secure_boot]
  nvidia_driver:
    description:
      - Which NVIDIA driver is planned - V(host) (packages on the host), V(container) (GPU Operator driver container)
        or V(none).
    type: str
    choices: [none, host, container]
    default: none
  exclude_host_driver_nodes:
    description:
      - With O(nvidia_driver=container), a host that has its own NVIDIA driver is labelled
        C(nvidia.com/gpu.deploy.driver=false) (RV(node_labels)) so the driver container skips it, instead of being an
        error; its GPUs then use the host driver (the fabricmanager rule applies to it).
    type: bool
    default: false
  driver_build:
    description: Whether a kernel module build (DKMS or driver container compiling for this kernel) is planned.
    type: bool
    default: false
  ofed:
    description:
      - Which RDMA driver stack is planned - V(host) (MLNX_OFED/DOCA-OFED on the host), V(operator) (Network Operator
        DOCA driver container) or V(none).
    type: str
    choices: [none, host, operator]
    default: none
  rdma:
    description: Whether the GPU Operator's driver container enables GPUDirect RDMA (C(driver.rdma.enabled)).
    type: bool
    default: false
  use_host_mofed:
    description: The GPU Operator's C(driver.rdma.useHostMofed); must agree with the host's MOFED when O(rdma=true).
    type: bool
    default: false
  gpudirect:
    description:
      - Whether GPUDirect P2P/RDMA is requested - V(true), V(false), or V(auto) (on when the host has NVIDIA GPUs and
        RDMA NICs).
    type: raw
    default: false
  sriov:
    description: The VF counts planned per PF.
    type: list
    elements: dict
    suboptions:
      pf:
        description: PF netdev name or PCI address (C(0000:14:00.0) or C(14:00.0)).
        type: str
        required: true
      num_vfs:
        description: VF count planned.
        type: int
        required: true
  unsigned_modules:
    description:
      - Whether unsigned kernel modules (for example a locally built driver without module signing) are planned.
    type: bool
    default: false
  fix:
    description: host_prep's fix policies; RV(plan) says what they do on this host.
    type: dict
    suboptions:
      nouveau:
        description: V(auto) blacklists on hosts with NVIDIA GPUs; V(blacklist), V(remove) or V(skip).
        type: str
        choices: [auto, blacklist, remove, skip]
        default: skip
      acs:
        description: V(auto) disables ACS on the GPU/NIC paths when GPUDirect is on; V(disable), V(enable), V(skip).
        type: str
        choices: [auto, disable, enable, skip]
        default: skip
      acs_devices:
        description: Bridge/switch-port PCI addresses for ACS; empty means every port with ACS on the GPU/NIC paths.
        type: list
        elements: str
        default: []
      fabricmanager:
        description: V(auto) on NVSwitch hosts that use the host driver; V(present) or V(skip).
        type: str
        choices: [auto, present, skip]
        default: skip
  planned_fixes:
    description:
      - Fixes an earlier step of this run applies before the checked state matters (for example host_prep's plan
        when the GPU Operator guards run in check mode); their findings are reported as the plan, not failures.
    type: list
    elements: str
    choices: [nouveau, acs, sriov, fabricmanager]
    default: []
  reboot_pending:
    description: A reboot that applies the fixes is already reported (nouveau still loaded is then a warning).
    type: bool
    default: false
  fail_on:
    description: Fail at findings of this severity or worse; V(never) only reports.
    type: str
    choices: [error, warning, never]
    default: error
  probe:
    description:
      - With O(stage=preflight), unless the module fails, also ask each fix of RV(plan) what it would change now and
        return the answers as RV(pending). Each fix module's own action runs here in check mode (the same code as
        M(gpuops.platform.nouveau_blacklist), M(gpuops.platform.pcie_acs), M(gpuops.platform.sriov_vfs) and
        M(gpuops.platform.fabricmanager); nothing is written or run that changes the host), with the parameters
        host_prep passes them. host_prep then skips the modules with nothing to do - one module round trip less per
        fix on a host already prepared.
    type: dict
    suboptions:
      acs_persist:
        description: The O(gpuops.platform.pcie_acs#module:persist) host_prep passes.
        type: bool
        default: false
      sriov_persist:
        description: The O(gpuops.platform.sriov_vfs#module:persist) host_prep passes.
        type: bool
        default: false
      validate:
        description:
          - When no fix is pending, also return RV(validation) - what this module answers with O(stage=validate)
            on the same facts, given this call's O(node_name), O(nvidia_driver), O(gpudirect), O(sriov) and O(fix),
            O(reboot_pending) from the probe (C(reboot_required) of RV(pending)), O(fail_on=error) and every other
            option at its default (host_prep's validation). Nothing will change the host before the validation, so
            its answer is known now - one module run less per prepared host.
        type: bool
        default: false
  hosts:
    description:
      - Evaluate several hosts whose facts are already known (for example those host_prep validated earlier in this
        run), in one module run, wherever the task runs (nothing is read from the hosts). Each host gets this call's
        other options with its own C(node_name), C(facts) and C(planned_fixes) (added to O(planned_fixes)); the
        results are in RV(hosts), and RV(findings), RV(report), RV(summary), RV(passed) and RV(msg) cover all of them.
      - Mutually exclusive with O(facts), O(node_name), O(probe) and O(inventory_hosts).
    type: list
    elements: dict
    suboptions:
      node_name:
        description: The host's name, as O(node_name).
        type: str
        required: true
      facts:
        description: The host's C(gpuops_host) facts, as O(facts).
        type: dict
        required: true
      planned_fixes:
        description: Fixes planned on this host, as O(planned_fixes).
        type: list
        elements: str
        choices: [nouveau, acs, sriov, fabricmanager]
        default: []
  inventory_hosts:
    description:
      - O(hosts) from the inventory - the names of hosts whose C(gpuops_host) facts this run already gathered. The
        module's action plugin builds O(hosts) from each host's variables on the controller - C(gpuops_node_name) (else
        the inventory name), C(ansible_facts.gpuops_host) and, in check mode, C(host_prep_planned_fixes) - and a host
        without those facts is an error naming it.
      - Mutually exclusive with O(hosts), O(facts), O(node_name) and O(probe).
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Preflight for a host driver build with GPUDirect RDMA and SR-IOV
  gpuops.platform.gpu_host_preflight:
    nvidia_driver: host
    driver_build: true
    ofed: operator
    gpudirect: true
    sriov:
      - {pf: ens1f0np0, num_vfs: 8}
  become: true

- name: The GPU Operator guards, evaluated on every GPU host (facts gathered there)
  gpuops.platform.gpu_host_preflight:
    node_name: "{{ item }}"
    checks: [driver, mofed, fabricmanager]
    nvidia_driver: container
    exclude_host_driver_nodes: true
    fail_on: never
  delegate_to: "{{ item }}"
  loop: "{{ groups['gpu_nodes'] }}"
  register: guards

- name: The same guards for hosts whose facts this run already gathered, in one module run on the controller
  gpuops.platform.gpu_host_preflight:
    hosts:
      - {node_name: dgx-h100-0, facts: "{{ hostvars['dgx-h100-0'].ansible_facts.gpuops_host }}"}
      - {node_name: dgx-h100-1, facts: "{{ hostvars['dgx-h100-1'].ansible_facts.gpuops_host }}"}
    checks: [driver, mofed, fabricmanager]
    nvidia_driver: container
    exclude_host_driver_nodes: true
    fail_on: never

- name: The same, naming the inventory hosts (the action plugin reads their facts and node names)
  gpuops.platform.gpu_host_preflight:
    inventory_hosts: [dgx-h100-0, dgx-h100-1]
    checks: [driver, mofed, fabricmanager]
    nvidia_driver: container
    exclude_host_driver_nodes: true
    fail_on: never
  register: guards_known
"""

RETURN = r"""
findings:
  description: Every finding, in rule order.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Stable identifier, for example V(kernel-headers-missing), V(acs-enabled), V(sriov-vfs-above-limit).
      type: str
    severity:
      description: V(error), V(warning) or V(info).
      type: str
    object:
      description:
        - What the finding is about, C(kind) (V(Host), V(PCIDevice), V(KernelModule), V(Service), ...) and
          C(name).
      type: dict
    evidence:
      description: The values read from the host that show it.
      type: list
      elements: str
    cause:
      description: What is wrong and why it matters.
      type: str
    fix:
      description: How to fix it.
      type: str
    fixed_by:
      description: The host_prep fix that addresses it (V(nouveau), V(acs), V(sriov), V(fabricmanager)) or null.
      type: str
    planned:
      description: Whether a planned fix addresses it (reported as the plan, never a failure).
      type: bool
    concern:
      description: The rule that produced it (one of O(checks)).
      type: str
    host:
      description: O(node_name).
      type: str
  sample:
    - id: nouveau-loaded
      severity: error
      object: {kind: KernelModule, name: nouveau}
      evidence: ["loaded: True, refcount 1", "blacklist sources: none", "bound to 0000:1b:00.0 (NVIDIA L40S)"]
      cause: nouveau is loaded (in use, a reboot is needed after blacklisting) and bound to 0000:1b:00.0 (NVIDIA L40S)
      fix: run host_prep (gpuops.platform.nouveau_blacklist state=present), then reboot if reboot_required
      fixed_by: nouveau
      planned: false
      concern: nouveau
      host: l40s-0
report:
  description: One line per finding (severity, id, object, cause, evidence, fix), values printed plainly.
  returned: always
  type: list
  elements: str
summary:
  description: Number of findings per severity.
  returned: always
  type: dict
  sample: {"error": 1, "warning": 0, "info": 0}
passed:
  description:
    - Whether no finding that is not planned reached O(fail_on) (V(error) with O(fail_on=never), which only keeps
      the module from failing).
  returned: always
  type: bool
hosts:
  description:
    - With O(hosts), one result per host in the order given - C(node_name), C(findings), C(report), C(summary),
      C(plan), C(node_labels), C(passed) and C(msg), as this module returns them for one host (never C(failed)).
  returned: with O(hosts)
  type: list
  elements: dict
  sample:
    - {node_name: dgx-h100-0, passed: true, msg: "dgx-h100-0: host preflight passed (no finding)", node_labels: {}}
plan:
  description:
    - What host_prep's fixes do on this host - C(nouveau) (V(present), V(absent) or null), C(acs) (C(state) and
      C(devices), or null), C(fabricmanager) (bool), C(sriov) (requests with the PF's normalized PCI C(address)),
      C(gpudirect) (bool) and C(fixes) (the names of the fixes that run).
  returned: unless O(hosts) (then per host in RV(hosts))
  type: dict
pending:
  description:
    - With O(probe), per fix of RV(plan) whether its module would change the host now - C(nouveau), C(acs) and
      C(fabricmanager) (null when not planned) and C(sriov) (by PF address), each C(pending) (bool),
      C(reboot_required) (bool) and, when the probe itself failed, C(error) (the fix then counts as pending, so its
      module runs and reports the error); C(sriov_pending), the addresses of the PFs whose VFs would change, in plan
      order; C(any), whether any fix is pending; and C(reboot_required), whether any fix
      needs a reboot now (also with nothing pending - nouveau blacklisted but still loaded).
  returned: with O(probe) and O(stage=preflight), unless the module fails
  type: dict
  sample:
    any: true
    reboot_required: false
    nouveau: {pending: false, reboot_required: false}
    acs: {pending: false, reboot_required: false}
    fabricmanager: null
    sriov: {"0000:13:00.0": {pending: true, reboot_required: false}}
    sriov_pending: ["0000:13:00.0"]
validation:
  description:
    - With O(probe.validate) and nothing pending, the result of the validate stage on the same facts (see
      O(probe.validate)) - RV(findings), RV(report), RV(summary), RV(plan), RV(node_labels), RV(passed), RV(msg),
      C(node_name), C(changed); never C(failed) (host_prep asserts on C(passed)).
  returned: with O(probe.validate), O(stage=preflight) and no fix pending, unless the module fails
  type: dict
  sample: {passed: true, msg: "dgx-h100-0: host validation passed (no finding)", findings: []}
ansible_facts:
  description: The facts it gathered itself (without O(facts)), as M(gpuops.platform.gpu_host_facts) sets them.
  returned: when O(facts) is not given
  type: dict
  contains:
    gpuops_host:
      description: The GPU host description (see M(gpuops.platform.gpu_host_facts)).
      type: dict
node_labels:
  description: Node labels the cluster plane must set for this host, for example C(nvidia.com/gpu.deploy.driver=false).
  returned: unless O(hosts) (then per host in RV(hosts))
  type: dict
node_patch:
  description:
    - The Node object (C(apiVersion), C(kind), C(metadata.name) and C(metadata.labels)) that sets RV(node_labels), for
      one server-side apply of every host's; only when RV(node_labels) is not empty.
  returned: when RV(node_labels) is not empty (with O(hosts), per host in RV(hosts))
  type: dict
  sample: {apiVersion: v1, kind: Node, metadata: {name: dgx-h100-0, labels: {nvidia.com/gpu.deploy.driver: "false"}}}
node_name:
  description: O(node_name), or V(host).
  returned: unless O(hosts) (then per host in RV(hosts))
  type: str
msg:
  description: A summary naming the host; on failure every failing finding with its evidence and fix.
  returned: always
  type: str
"""

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.host import _preflight  # noqa: E402

ARGUMENT_SPEC = _preflight.ARGUMENT_SPEC


def main() -> None:
    run_module(
        _preflight.run,
        argument_spec=ARGUMENT_SPEC,
        mutually_exclusive=_preflight.MUTUALLY_EXCLUSIVE,
        supports_check_mode=True,
    )


if __name__ == "__main__":
    main()

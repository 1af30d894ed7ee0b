# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""SR-IOV Network Operator (k8snetworkplumbingwg v1.6.0): the sriov_network_operator role's policies against the
hosts' ``gpu_host_facts`` (NICs, PF names, firmware VF limits) and host_prep's own VF creation, as findings. Pure
functions (no I/O).

The one-owner-per-PF rule: a PF whose VFs host_prep creates (it is listed in the host's ``host_prep_sriov_vfs``,
with any count, 0 included) is owned by host_prep; a policy that selects it must say ``externally_managed: true``
(the operator then only hands the existing VFs to its device plugin and never writes ``sriov_numvfs``) and may ask
for at most the VFs host_prep creates. A PF not listed there is owned by the operator's config daemon; a policy
that marks it externally managed has nobody creating its VFs. Anything else is a finding, never a silent fight.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.host import _pcie_rules
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import _inputs
from ansible_collections.gpuops.platform.plugins.module_utils.sriov._sriov_policy import (
    MELLANOX,
    MLX_MAX_VFS,
    VAR_HOST_PREP,
    VAR_POLICIES,
    Finding,
    _errors,
    _finding,
    _policy,
)
from ansible_collections.gpuops.platform.plugins.module_utils.status._sriov_ready import (
    _netdevs,
    _pf_range,
    nic_selected,
    selects_node,
)


# -- host findings ---------------------------------------------------------------------------------------------
def _nic_name(nic: Mapping[str, Any]) -> str:
    netdev = nic.get("netdev") or "-"
    return f"{netdev} ({nic.get('address')})"


def _nic_line(nic: Mapping[str, Any]) -> str:
    total = nic.get("sriov_totalvfs")
    return "{} {}:{} {}, sriov_totalvfs {}".format(
        _nic_name(nic),
        nic.get("vendor_id"),
        nic.get("device_id"),
        nic.get("link_layer") or "",
        "none (no SR-IOV)" if total is None else total,
    ).replace("  ", " ")


_HOSTS = "\x00hosts\x00"  # stands for the hosts a finding holds on, until findings that differ only there merge
_SHOWN_HOSTS = 3


def _hosts_text(hosts: Sequence[str]) -> str:
    """``host dgx-01``, ``hosts dgx-01, dgx-02``, ``hosts dgx-01, dgx-02, dgx-03 and 997 more``."""
    shown = ", ".join(hosts[:_SHOWN_HOSTS])
    more = f" and {len(hosts) - _SHOWN_HOSTS} more" if len(hosts) > _SHOWN_HOSTS else ""
    return f"host{'s' if len(hosts) > 1 else ''} {shown}{more}"


def _fill(value: Any, text: str) -> Any:
    if isinstance(value, str):
        return value.replace(_HOSTS, text)
    if isinstance(value, list):
        return [_fill(v, text) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, text) for k, v in value.items()}
    return value


def _merge_hosts(per_host: Iterable[tuple[str, Finding]]) -> list[Finding]:
    """Findings written with the hosts placeholder, one per host: those equal but for the host become one finding
    that names its hosts (a uniform fleet of 1000 nodes gives one finding, not 1000), in first-seen order."""
    groups: dict[str, tuple[Finding, list[str]]] = {}
    for host, f in per_host:
        groups.setdefault(json.dumps(f, sort_keys=True), (f, []))[1].append(host)
    return [_fill(f, _hosts_text(hosts)) for f, hosts in groups.values()]


def _vf_range(spec: Mapping[str, Any], nic: Mapping[str, Any]) -> tuple[int, int]:
    names = set(_netdevs(nic))
    for entry in (spec.get("nicSelector") or {}).get("pfNames") or []:
        name, first, last, _ranged = _pf_range(entry)
        if name in names and first is not None and last is not None:
            return first, last
    return 0, int(spec.get("numVfs") or 0) - 1


def _limit_findings(policy: str, on: str, nic: Mapping[str, Any], num: int) -> list[Finding]:
    addr = nic.get("address") or "?"
    total = nic.get("sriov_totalvfs")
    where = f"PF {_nic_name(nic)} on {on}"
    if total is None:
        return [
            _finding(
                "sriov-policy-pf-not-capable",
                "error",
                "SriovNetworkNodePolicy",
                policy,
                [f"{addr} on {on}: no sriov_totalvfs in sysfs"],
                f"policy {policy} selects {where}, which has no SR-IOV capability (off in firmware or BIOS)",
                "enable SR-IOV in the BIOS and the NIC firmware "
                f"(mlxconfig -d {addr} set SRIOV_EN=1 NUM_OF_VFS={num}), or narrow the policy's nic_selector",
            )
        ]
    out = []
    if num > total:
        out.append(
            _finding(
                "sriov-policy-vfs-above-limit",
                "error",
                "SriovNetworkNodePolicy",
                policy,
                [f"sriov_totalvfs: {total}", f"num_vfs: {num}"],
                f"policy {policy} asks for {num} VFs on {where}, above the firmware limit sriov_totalvfs {total}: "
                "the kernel refuses the write and the node never syncs",
                f"lower num_vfs to {total} or less, or raise the limit in firmware: mlxconfig -d {addr} set "
                f"SRIOV_EN=1 NUM_OF_VFS={num}, then reboot",
            )
        )
    if nic.get("vendor_id") == MELLANOX and num > MLX_MAX_VFS:
        out.append(
            _finding(
                "sriov-policy-vfs-above-operator-limit",
                "error",
                "SriovNetworkNodePolicy",
                policy,
                [f"num_vfs: {num}", f"operator limit for vendor {MELLANOX}: {MLX_MAX_VFS}"],
                f"policy {policy} asks for {num} VFs on {where}: the operator's webhook refuses more than "
                f"{MLX_MAX_VFS} VFs on an NVIDIA/Mellanox PF",
                f"lower num_vfs to {MLX_MAX_VFS} or less",
            )
        )
    return out


def _claims_findings(on: str, nic: Mapping[str, Any], claims: list[tuple[str, Mapping[str, Any]]]) -> list[Finding]:
    """Two or more policies on one PF: same VF count, disjoint VF ranges, same externally_managed (the operator
    merges them per PF: different counts make the result depend on priority and names)."""
    where = f"PF {_nic_name(nic)} on {on}"
    out = []
    counts = {name: int(spec.get("numVfs") or 0) for name, spec in claims}
    if len(set(counts.values())) > 1:
        out.append(
            _finding(
                "sriov-policy-pf-conflict",
                "error",
                "PCIDevice",
                str(nic.get("address")),
                [f"policy {n}: num_vfs {c}" for n, c in counts.items()],
                f"{len(claims)} policies claim {where} with different VF counts: the PF gets one sriov_numvfs",
                "give every policy on this PF the same num_vfs and split the VFs with pf_names ranges "
                "(ens1f0#0-3, ens1f0#4-7), or select the PF from one policy only",
            )
        )
    for i, (a_name, a_spec) in enumerate(claims):
        for b_name, b_spec in claims[i + 1 :]:
            a_rng, b_rng = _vf_range(a_spec, nic), _vf_range(b_spec, nic)
            if a_rng[0] <= b_rng[1] and b_rng[0] <= a_rng[1]:
                out.append(
                    _finding(
                        "sriov-policy-vf-range-overlap",
                        "error",
                        "PCIDevice",
                        str(nic.get("address")),
                        [f"policy {a_name}: VFs {a_rng[0]}-{a_rng[1]}", f"policy {b_name}: VFs {b_rng[0]}-{b_rng[1]}"],
                        f"policies {a_name} and {b_name} both claim VFs of {where}: the operator gives overlapping "
                        "VFs to one policy only (its webhook refuses the second)",
                        "give each policy its own VF range with pf_names: [<pf>#<first>-<last>]",
                    )
                )
            if bool(a_spec.get("externallyManaged")) != bool(b_spec.get("externallyManaged")):
                out.append(
                    _finding(
                        "sriov-policy-external-mixed",
                        "error",
                        "PCIDevice",
                        str(nic.get("address")),
                        [
                            f"policy {a_name}: externally_managed {str(bool(a_spec.get('externallyManaged'))).lower()}",
                            f"policy {b_name}: externally_managed {str(bool(b_spec.get('externallyManaged'))).lower()}",
                        ],
                        f"policies {a_name} and {b_name} disagree on who creates the VFs of {where}",
                        "set the same externally_managed on every policy of the PF (see the one-owner rule in "
                        "docs/sriov_network_operator.md)",
                    )
                )
    return out


def pf_ownership_findings(
    host: str, nic: Mapping[str, Any], claims: list[tuple[str, Mapping[str, Any]]], host_prep_vfs: int | None
) -> list[Finding]:
    """One owner per PF. host_prep owns a PF it lists (``host_prep_vfs`` is its count, None when not listed): the
    policies on it (``claims``: (policy name, spec)) must be externally managed and ask for at most that many VFs.
    Otherwise the operator's config daemon owns it: an externally managed policy there has nobody creating its
    VFs."""
    return _ownership(f"host {host}", nic, claims, host_prep_vfs)


def _ownership(
    on: str, nic: Mapping[str, Any], claims: list[tuple[str, Mapping[str, Any]]], host_prep_vfs: int | None
) -> list[Finding]:
    addr = str(nic.get("address"))
    where = f"PF {_nic_name(nic)} on {on}"
    out = []
    for name, spec in claims:
        num = int(spec.get("numVfs") or 0)
        external = bool(spec.get("externallyManaged"))
        if host_prep_vfs is not None and not external:
            out.append(
                _finding(
                    "sriov-pf-two-owners",
                    "error",
                    "PCIDevice",
                    addr,
                    [
                        f"{VAR_HOST_PREP} on {on} sets {host_prep_vfs} VFs",
                        f"policy {name}: num_vfs {num}, externally_managed false",
                    ],
                    f"{where} has two owners: host_prep's sriov_vfs (and its boot-time udev rule) and the operator's "
                    f"config daemon (policy {name}) would both write sriov_numvfs",
                    f"either set externally_managed: true on policy {name} (host_prep keeps creating the VFs, the "
                    f"operator only hands them out), or remove the PF from {VAR_HOST_PREP} on {on} (the operator "
                    "creates them)",
                )
            )
        elif host_prep_vfs is not None and num > host_prep_vfs:
            out.append(
                _finding(
                    "sriov-policy-above-host-prep",
                    "error",
                    "PCIDevice",
                    addr,
                    [f"{VAR_HOST_PREP} on {on} sets {host_prep_vfs} VFs", f"policy {name}: num_vfs {num}"],
                    f"policy {name} (externally managed) asks for {num} VFs of {where}, but host_prep creates "
                    f"{host_prep_vfs}: the operator refuses more VFs than exist",
                    f"raise num_vfs for the PF in {VAR_HOST_PREP} on {on} to {num}, or lower the policy's num_vfs",
                )
            )
        elif host_prep_vfs is None and external:
            current = nic.get("sriov_numvfs") or 0
            missing = current < num
            out.append(
                _finding(
                    "sriov-policy-external-no-owner",
                    "error" if missing else "warning",
                    "PCIDevice",
                    addr,
                    [
                        f"{VAR_HOST_PREP} on {on} has no entry for this PF",
                        f"sriov_numvfs now: {current}",
                        f"policy {name}: num_vfs {num}",
                    ],
                    f"policy {name} is externally managed but nothing creates the VFs of {where}"
                    + ("" if missing else f" at boot (the {current} there now would be lost at the next reboot)"),
                    f"add {{pf: {nic.get('netdev') or addr}, num_vfs: {num}}} to {VAR_HOST_PREP} on {on}, or set "
                    f"externally_managed: false on policy {name} so the operator creates them",
                )
            )
    return out


def _host_prep_counts(facts: Mapping[str, Any], requests: Any) -> dict[str, int]:
    """PCI address -> the VF count host_prep_sriov_vfs sets there (entries that do not resolve are host_prep's own
    findings)."""
    if not isinstance(requests, list):
        return {}
    resolved, _problems = _pcie_rules.resolve_sriov(dict(facts), [dict(r) for r in requests if isinstance(r, Mapping)])
    return {r["address"]: r["num_vfs"] for r in resolved}


def policy_host_findings(policies: Any, hosts: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """The policies against the inventory hosts, before any change. ``hosts`` maps an inventory host (= node name)
    to ``{facts: <gpu_host_facts gpuops_host>, labels: <node labels or None>, host_prep_sriov_vfs: [...]}``.

    Findings: a pf_names entry or root device no (selected) host has, a policy that matches no NIC at all (each
    listing the NICs the hosts have), num_vfs above a PF's sriov_totalvfs (or the operator's limit of 128 on
    NVIDIA/Mellanox PFs) or on a PF without SR-IOV, policies on one PF with different counts, overlapping VF
    ranges or mixed externally_managed, and the one-owner-per-PF rule with host_prep. Invalid policies are left
    to :func:`policy_input_findings`."""
    items = policies if isinstance(policies, list) else []
    valid = []
    for i, rail in enumerate(items):
        obj, found = _policy(rail, f"{VAR_POLICIES}[{i}]")
        if not _errors(found):
            valid.append((obj["metadata"]["name"], obj["spec"]))
    out: list[Finding] = []
    names = sorted(hosts)
    for host in names:
        if not (hosts[host] or {}).get("facts"):
            out.append(
                _finding(
                    "sriov-host-facts-missing",
                    "warning",
                    "Host",
                    host,
                    ["no gpu_host_facts for this host"],
                    f"host {host} has no gathered facts: its NICs cannot be checked against the policies",
                    "run gpuops.platform.gpu_host_facts on the host (host_prep does) before the operator roles",
                )
            )
    claims: dict[tuple[str, str], tuple[Mapping[str, Any], list[tuple[str, Mapping[str, Any]]]]] = {}
    per_host: list[tuple[str, Finding]] = []
    for name, spec in valid:
        selector = spec.get("nicSelector") or {}
        selected: list[str] = []
        matched = False
        nics_seen: dict[str, list[str]] = {}  # NIC line -> hosts, for the evidence
        pf_present: set[str] = set()
        addr_present: set[str] = set()
        for host in names:
            entry = hosts[host] or {}
            facts = entry.get("facts")
            if not facts or not selects_node(spec.get("nodeSelector") or {}, entry.get("labels")):
                continue
            selected.append(host)
            for nic in facts.get("nics") or []:
                nics_seen.setdefault(_nic_line(nic), []).append(host)
                pf_present.update(_netdevs(nic))
                addr_present.add(str(nic.get("address")))
                if not nic_selected(selector, nic):
                    continue
                matched = True
                per_host += [(host, f) for f in _limit_findings(name, _HOSTS, nic, int(spec["numVfs"]))]
                claims.setdefault((host, str(nic.get("address"))), (nic, []))[1].append((name, spec))
        have = [f"{line} on {_hosts_text(on)}" for line, on in nics_seen.items()] or [
            "the selected hosts have no network PF"
        ]
        with_facts = [h for h in names if (hosts[h] or {}).get("facts")]
        if not selected and with_facts:
            out.append(
                _finding(
                    "sriov-policy-selects-no-host",
                    "error",
                    "SriovNetworkNodePolicy",
                    name,
                    [
                        f"node_selector: {_inputs.show(spec.get('nodeSelector'))}",
                        f"inventory: {_hosts_text(with_facts)}",
                    ],
                    f"policy {name} selects no inventory host: its node_selector matches none of their node labels",
                    "fix the policy's node_selector, or label the nodes",
                )
            )
            continue
        unknown_pfs = [p for p in selector.get("pfNames") or [] if _pf_range(p)[0] not in pf_present]
        unknown_roots = [r for r in selector.get("rootDevices") or [] if r not in addr_present]
        for fid, missing, what in (
            ("sriov-policy-pf-unknown", unknown_pfs, "PF name"),
            ("sriov-policy-root-device-unknown", unknown_roots, "root device"),
        ):
            if missing:
                out.append(
                    _finding(
                        fid,
                        "error",
                        "SriovNetworkNodePolicy",
                        name,
                        have,
                        f"policy {name} names {what} {', '.join(missing)}, which no selected host has",
                        "name PFs the hosts have (evidence: the network PFs of the selected hosts)",
                    )
                )
        if not matched and not unknown_pfs and not unknown_roots:
            out.append(
                _finding(
                    "sriov-policy-matches-no-nic",
                    "error",
                    "SriovNetworkNodePolicy",
                    name,
                    [f"nic_selector: {_inputs.show(selector)}", *have],
                    f"policy {name}'s nic_selector matches no NIC of the selected hosts: no VF would be created and "
                    "its resource never appears",
                    "fix vendor/device_id/pf_names/root_devices to a NIC of the evidence",
                )
            )
    for (host, _addr), (nic, pf_claims) in sorted(claims.items()):
        entry = hosts[host] or {}
        counts = _host_prep_counts(entry.get("facts") or {}, entry.get(VAR_HOST_PREP))
        found = _claims_findings(_HOSTS, nic, pf_claims) if len(pf_claims) > 1 else []
        found += _ownership(_HOSTS, nic, pf_claims, counts.get(str(nic.get("address"))))
        per_host += [(host, f) for f in found]
    return out + _merge_hosts(per_host)

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""SR-IOV Network Operator (k8snetworkplumbingwg v1.6.0) readiness, as pure predicates (no I/O): what a
SriovNetworkNodeState and a Node say about the policies that were applied or removed.

- :func:`sriov_network_node_state`: readiness predicate (``_readiness`` style: None when ready, else the unmet
  condition); :func:`node_resource`: a node advertises the VFs of a pool.
- :func:`unapplied_policies`, :func:`lingering_policies`, :func:`unreset_pfs`: what a wait for a policy
  change (or removal) still waits for; :func:`expected_resources`: the resources a node should advertise.
- Upstream's selectors, which the role's host rules (``sriov/_sriov_policy``) apply too: :func:`selects_node`,
  :func:`nic_selected`, :func:`_pf_range`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

Obj = dict[str, Any]
Unmet = Optional[str]  # noqa: UP045 - a runtime alias: module_utils still import on Python 3.9

SYNC_SUCCEEDED, SYNC_IN_PROGRESS, SYNC_FAILED = "Succeeded", "InProgress", "Failed"
DESIRED_STATE = "sriovnetwork.openshift.io/desired-state"
CURRENT_STATE = "sriovnetwork.openshift.io/current-state"
DRAIN_IDLE = "Idle"


def _pf_range(entry: str) -> tuple[str, int | None, int | None, str | None]:
    """``ens1f0`` or ``ens1f0#2-5`` -> (name, first, last, problem); upstream api/v1 ParseVfRange."""
    name, sep, rng = entry.partition("#")
    if not sep:
        return name, None, None, None
    first, dash, last = rng.partition("-")
    if not dash or not first.isdigit() or not last.isdigit():
        return name, None, None, f"the VF range after # must be <first>-<last>, for example {name}#0-3"
    return name, int(first), int(last), None


def _netdevs(nic: Mapping[str, Any]) -> list[str]:
    names = list(nic.get("netdevs") or [])
    if nic.get("netdev") and nic["netdev"] not in names:
        names.append(nic["netdev"])
    return names


def nic_selected(selector: Mapping[str, Any], nic: Mapping[str, Any]) -> bool:
    """Upstream's SriovNetworkNicSelector.Selected (api/v1/helper.go) on a gpu_host_facts NIC: every field that is
    set must match (vendor, deviceID, rootDevices by PCI address, pfNames by netdev without the #range)."""
    if not selector:
        return False
    if selector.get("vendor") and selector["vendor"] != nic.get("vendor_id"):
        return False
    if selector.get("deviceID") and selector["deviceID"] != nic.get("device_id"):
        return False
    if selector.get("rootDevices") and nic.get("address") not in selector["rootDevices"]:
        return False
    if selector.get("pfNames"):
        names = {_pf_range(p)[0] for p in selector["pfNames"]}
        if not names & set(_netdevs(nic)):
            return False
    return True


def selects_node(node_selector: Mapping[str, str], labels: Mapping[str, Any] | None) -> bool:
    """Upstream's SriovNetworkNodePolicy.Selected: every nodeSelector label present with that value. Unknown
    labels (None: the node has not joined, or the caller has no labels) select."""
    if labels is None:
        return True
    return all(str(labels.get(k)) == v if k in labels else False for k, v in node_selector.items())


def resource(prefix: str, resource_name: str) -> str:
    """The node resource a policy's VFs are advertised as: <prefix>/<resourceName>."""
    return f"{prefix}/{resource_name}"


def expected_resources(policies: Sequence[Obj], node: Mapping[str, Any], prefix: str) -> list[str]:
    """The resources a node should advertise: those of the policies whose nodeSelector selects it (node: a Node
    object as the API server returns it)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    names = {
        resource(prefix, p["spec"]["resourceName"])
        for p in policies
        if selects_node((p.get("spec") or {}).get("nodeSelector") or {}, labels)
    }
    return sorted(names)


def sriov_network_node_state(obj: Obj) -> Unmet:
    """SriovNetworkNodeState: the config daemon reports syncStatus Succeeded, no drain is under way (the
    desired-state / current-state annotations, when present, are Idle), and every PF of the spec has its numVfs in
    the status (the status has no observedGeneration: a Succeeded from before the last policy change is caught
    here)."""
    status = obj.get("status") or {}
    sync = status.get("syncStatus")
    error = status.get("lastSyncError")
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    desired, current = annotations.get(DESIRED_STATE), annotations.get(CURRENT_STATE)
    drain = f"drain desired-state {desired or 'unset'}, current-state {current or 'unset'}"
    if not sync:
        return (
            "status.syncStatus is empty: no config daemon has reported for this node (is a "
            "sriov-network-config-daemon pod running there? check configDaemonNodeSelector)"
        )
    if sync == SYNC_FAILED:
        return f"status.syncStatus is Failed: lastSyncError: {error or 'empty'}"
    reported = {i.get("pciAddress"): i for i in status.get("interfaces") or []}
    if sync != SYNC_SUCCEEDED:
        for iface in (obj.get("spec") or {}).get("interfaces") or []:
            got = reported.get(iface.get("pciAddress")) or {}
            want, limit = int(iface.get("numVfs") or 0), got.get("totalvfs")
            if isinstance(limit, int) and want > limit:
                # v1.6.0's config daemon refuses the count before writing it and retries: InProgress for ever
                return (
                    f"status.syncStatus is {sync}: spec asks {want} VFs on {iface.get('pciAddress')} "
                    f"({got.get('name') or '-'}), above its totalvfs {limit}; the config daemon refuses it "
                    "(NumVfs is larger than TotalVfs) and never syncs"
                )
        text = f"status.syncStatus is {sync}, want Succeeded ({drain}"
        if desired in ("Drain_Required", "Draining") or current == "Draining":
            text += "; a drain blocked by a PodDisruptionBudget keeps it here"
        return text + (f"; lastSyncError: {error})" if error else ")")
    if (desired and desired != DRAIN_IDLE) or (current and current != DRAIN_IDLE):
        return f"status.syncStatus is Succeeded but a drain is under way ({drain})"
    for iface in (obj.get("spec") or {}).get("interfaces") or []:
        want = int(iface.get("numVfs") or 0)
        got = reported.get(iface.get("pciAddress"))
        if got is None:
            return f"spec asks {want} VFs on {iface.get('pciAddress')}, which status.interfaces does not report"
        have = int(got.get("numVfs") or 0)
        if have != want:
            return (
                f"spec asks {want} VFs on {iface.get('pciAddress')} ({got.get('name') or '-'}), status reports {have}"
            )
    return None


def node_resource(node: Obj, name: str, minimum: int = 1) -> Unmet:
    """A Node (as the API server returns it) advertises at least ``minimum`` of resource ``name`` allocatable."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    value = alloc.get(name)
    try:
        count = int(value) if value is not None else 0
    except (TypeError, ValueError):
        count = 0
    if count >= minimum:
        return None
    return (
        f"allocatable {name} is {value if value is not None else 'absent'}, want {minimum} or more (the SR-IOV "
        "device plugin advertises no VF of this pool: check the SriovNetworkNodeState and the "
        "sriov-device-plugin pod on the node)"
    )


def _policy_names(states: Sequence[Obj]) -> set[Any]:
    named: set[Any] = set()
    for state in states:
        for iface in (state.get("spec") or {}).get("interfaces") or []:
            named.update(g.get("policyName") for g in iface.get("vfGroups") or [])
    return named


def lingering_policies(policies: Sequence[Obj], states: Sequence[Obj]) -> list[str]:
    """The deleted policies some SriovNetworkNodeState's ``spec.interfaces[].vfGroups[]`` still names (the operator
    applies a deletion about a second later): until then a state's status still describes them."""
    named = _policy_names(states)
    return sorted(p["metadata"]["name"] for p in policies if p["metadata"]["name"] in named)


def unreset_pfs(policies: Sequence[Obj], state: Obj, labels: Mapping[str, Any] | None) -> list[str]:
    """After ``policies`` were deleted: the PFs of ``state`` (its node's labels: ``labels``) that one of them selects,
    that no policy configures any more (not in ``spec.interfaces``) and that still report VFs. Upstream's config
    daemon resets such a PF to 0 VFs (pkg/host/internal/sriov/sriov.go getConfigureAndReset), except an externally
    managed one (host_prep owns its VFs)."""
    spec = {i.get("pciAddress") for i in (state.get("spec") or {}).get("interfaces") or []}
    out = []
    for iface in (state.get("status") or {}).get("interfaces") or []:
        have = int(iface.get("numVfs") or 0)
        if not have or iface.get("pciAddress") in spec or iface.get("externallyManaged"):
            continue
        nic = {
            "vendor_id": iface.get("vendor"),
            "device_id": iface.get("deviceID"),
            "address": iface.get("pciAddress"),
            "netdevs": [iface.get("name")] if iface.get("name") else [],
        }
        if any(
            selects_node((pol.get("spec") or {}).get("nodeSelector") or {}, labels)
            and nic_selected((pol.get("spec") or {}).get("nicSelector") or {}, nic)
            for pol in policies
        ):
            out.append(
                f"PF {iface.get('name') or '-'} ({iface.get('pciAddress')}) still has {have} VFs, want 0 (the config "
                "daemon resets the PFs of a deleted policy)"
            )
    return out


def unapplied_policies(policies: Sequence[Obj], states: Sequence[Obj]) -> list[str]:
    """The policies the operator has not written into any SriovNetworkNodeState yet (no ``spec.interfaces[].vfGroups[]``
    names them; upstream ``Apply`` records ``policyName`` there), so that a wait does not judge a state whose spec
    predates the policies (the operator applies a policy change about a second later). A failed state ends the
    wait too: it is what the state wait then reports."""
    named: set[Any] = set()
    for state in states:
        if ((state.get("status") or {}).get("syncStatus")) == SYNC_FAILED:
            return []
        for iface in (state.get("spec") or {}).get("interfaces") or []:
            named.update(g.get("policyName") for g in iface.get("vfGroups") or [])
    return sorted(p["metadata"]["name"] for p in policies if p["metadata"]["name"] not in named)

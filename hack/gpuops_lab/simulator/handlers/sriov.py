"""SriovNetworkNodeStateHandler: the node side of the SR-IOV Network Operator (k8snetworkplumbingwg v1.6.0), i.e.
what its config daemon and device plugin do on real hardware. The operator itself is real: the lab runs it out of
cluster (hack/gpuops_lab/sriov.py). It creates one SriovNetworkNodeState per node its configDaemonNodeSelector
selects and, once the state reports interfaces, writes the policies' PF configuration into `spec.interfaces`
(api/v1/helper.go Apply). This handler plays, per SriovNetworkNodeState (docs/sriov_network_operator.md):

- `status.interfaces`: the NIC PFs of the node's hardware profile, named and addressed as the simulated host
  names them (`network.profile_nics`): `name, pciAddress, vendor, deviceID, driver, mtu, linkType` (`IB`/`ETH`,
  pkg/consts), `linkAdminState`, `totalvfs` (the profile's `sriov_totalvfs`, 0 without SR-IOV), `numVfs` and `Vfs`
  (upstream's capital V: `{pciAddress, vfID, vendor, deviceID, driver}`, VF addresses at first VF offset 1, stride
  1 from the PF's routing ID, as the simulated host's SR-IOV capability says).
- the config daemon's sync: every PF of `spec.interfaces` gets its `numVfs` (the kernel's `sriov_numvfs`); a PF
  the spec no longer names is reset to 0. A count above the PF's `sriov_totalvfs` is refused as the kernel does
  (ERANGE): that PF keeps 0 VFs (the daemon writes 0 before a new count) and the state is `syncStatus: Failed`
  with `lastSyncError` naming the PF, the count and the limit. A PF the node does not have fails the same way.
  An `externallyManaged` PF is not written (upstream skips configSriovPFDevice there); *sim*: its VFs are taken to
  exist as host_prep made them, up to `sriov_totalvfs`. Otherwise `syncStatus: Succeeded`, `lastSyncError` empty.
- the device plugin: the node's capacity/allocatable `<prefix>/<resourceName>` = the VFs of each `vfGroups[]` entry
  (its `vfRange`) that exist on the PF, summed over the PFs; prefix `openshift.io` (the standalone chart's
  `operator.resourcePrefix`, which the lab's operator runs with; `_sriov_policy.resource_prefix`). Resources it set
  before and no longer wants are removed (recorded in the node annotation `sim.gpuops.io/sriov-resources`).
- *sim*: when it first reports a state's interfaces it sets the node label `sim.gpuops.io/sriov-state` to the
  state's UID. The operator computes `spec.interfaces` from `status.interfaces` but re-reads them only on a policy
  event, a node label change or its 5-minute resync (controllers/sriovnetworknodepolicy_controller.go): the label
  change makes it re-read them at once, as a policy applied before the config daemon reported would otherwise wait.

Fault (per node, hack/gpuops_lab/simulator/faults.py): `sriov-drain-blocked`: a change of the PF configuration
waits for a node drain that a PodDisruptionBudget blocks: `syncStatus: InProgress`, `lastSyncError` saying so, the
VFs stay as they were (the drain annotations are not written: the real operator's drain controller would act on
them and cordon the kwok node).

When the state is deleted (the operator deletes it with its SriovOperatorConfig, or for a node it no longer
selects) the resources it advertised and the label are removed.

Instances: as the other handlers, `SriovNetworkNodeStateHandler(instance="x")` handles only the states of nodes
labelled `sim.gpuops.io/instance=x`; the default instance only unlabelled ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...hostsim import model
from ..framework import NODE, Cache, Context, Handler, Key, Kind, Obj
from .network import profile_nics
from .nvidia import DEFAULT_INSTANCE, PROFILE_LABEL, annotations_of, in_scope, instance_mark, labels_of, load_profile

NODE_STATE = Kind("sriovnetwork.openshift.io/v1", "SriovNetworkNodeState")
RESOURCE_PREFIX = "openshift.io"
RESOURCES_ANNOTATION = "sim.gpuops.io/sriov-resources"
STATE_LABEL = "sim.gpuops.io/sriov-state"
FAULT_DRAIN_BLOCKED = "sriov-drain-blocked"
SRIOV_FAULTS = frozenset({FAULT_DRAIN_BLOCKED})
SUCCEEDED, FAILED, IN_PROGRESS = "Succeeded", "Failed", "InProgress"
DRAIN_BLOCKED_ERROR = (
    "drain of node {node} blocked: evicting its pods is refused by a PodDisruptionBudget (Cannot evict pod as it "
    "would violate the pod's disruption budget); the PF configuration waits for the drain"
)
LINK_TYPES = {"InfiniBand": "IB", "Ethernet": "ETH"}
VF_DRIVERS = {"15b3": "mlx5_core", "8086": "iavf"}


# -- pure pieces ---------------------------------------------------------------------------------------------
def vf_address(pf: str, index: int, offset: int = 1, stride: int = 1) -> str:
    """The PCI address of VF `index` of PF `pf` (domain:bus:dev.fn): routing ID + first VF offset + index * stride."""
    domain, bus, devfn = pf.split(":", 2)
    dev, fn = devfn.split(".", 1)
    rid = (int(bus, 16) << 8 | int(dev, 16) << 3 | int(fn, 16)) + offset + index * stride
    return f"{domain}:{rid >> 8 & 0xFF:02x}:{rid >> 3 & 0x1F:02x}.{rid & 7}"


def profile_pfs(profile: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The NIC PFs of a hardware profile as the config daemon discovers them: profile_nics (names and addresses as
    the simulated host has them) with the profile's sriov_totalvfs and VF device ID."""
    if not profile:
        return []
    loaded = {
        m if isinstance(m, str) else m.get("name") for m in (profile.get("host") or {}).get("modules_loaded") or ()
    }
    nics = profile_nics(profile, "mlx5_ib" in loaded)
    sriov = {}
    for f in model.topology(model.host_state(dict(profile))):
        if f.get("role") == "nic" and f.get("kind") == "endpoint":
            sriov[f["addr"]] = f.get("sriov") or {}
    out = []
    for nic in nics:
        cap = sriov.get(nic["address"]) or {}
        out.append({**nic, "totalvfs": int(cap.get("total") or 0), "vf_device": cap.get("vf_device")})
    return out


def _vf_count(vf_range: Any, created: int) -> int:
    """How many VFs of `first-last` exist when `created` VFs exist on the PF."""
    try:
        first, last = (int(x) for x in str(vf_range).split("-", 1))
    except ValueError:
        return 0
    return max(0, min(last, created - 1) - first + 1)


def sync(
    spec: Mapping[str, Any],
    pfs: Sequence[Mapping[str, Any]],
    current: Mapping[str, int],
    node: str,
    drain_blocked: bool = False,
) -> tuple[dict[str, int], str, str]:
    """The config daemon's pass over `spec.interfaces`: ({pciAddress: numVfs} after it, syncStatus, lastSyncError).
    `current`: the VFs each PF has now (from the last status)."""
    by_addr = {p["address"]: p for p in pfs}
    wanted: dict[str, int] = {}
    for iface in spec.get("interfaces") or ():
        wanted[str(iface.get("pciAddress"))] = int(iface.get("numVfs") or 0)
    result = {a: wanted.get(a, 0) for a in by_addr}
    if drain_blocked and any(int(current.get(a, 0)) != n for a, n in result.items()):
        return {a: int(current.get(a, 0)) for a in by_addr}, IN_PROGRESS, DRAIN_BLOCKED_ERROR.format(node=node)
    errors = []
    for addr, num in wanted.items():
        pf = by_addr.get(addr)
        if pf is None:
            errors.append(f"interface {addr} not found on node {node} (no such PCI device)")
            continue
        limit = int(pf.get("totalvfs") or 0)
        if num > limit:
            name = (pf.get("netdevs") or [""])[0] or "-"
            errors.append(
                f"failed to set sriov_numvfs to {num} on PF {name} ({addr}): write "
                f"/sys/bus/pci/devices/{addr}/sriov_numvfs: numerical result out of range "
                f"(sriov_totalvfs is {limit})"
            )
            result[addr] = 0
    if errors:
        return result, FAILED, "; ".join(errors)
    return result, SUCCEEDED, ""


def status_interfaces(pfs: Sequence[Mapping[str, Any]], num_vfs: Mapping[str, int]) -> list[dict[str, Any]]:
    out = []
    for pf in pfs:
        addr, num = pf["address"], int(num_vfs.get(pf["address"], 0))
        vendor = str(pf.get("vendor_id"))
        iface: dict[str, Any] = {
            "name": (pf.get("netdevs") or [""])[0],
            "pciAddress": addr,
            "vendor": vendor,
            "deviceID": str(pf.get("device_id")),
            "driver": pf.get("driver") or "",
            "mtu": 4092 if pf.get("link_layer") == "InfiniBand" else 1500,
            "linkType": LINK_TYPES.get(str(pf.get("link_layer")), "ETH"),
            "linkAdminState": "up",
            "totalvfs": int(pf.get("totalvfs") or 0),
            "numVfs": num,
        }
        if num:
            iface["Vfs"] = [
                {
                    "pciAddress": vf_address(addr, i),
                    "vfID": i,
                    "vendor": vendor,
                    "deviceID": str(pf.get("vf_device") or pf.get("device_id")),
                    "driver": VF_DRIVERS.get(vendor, ""),
                }
                for i in range(num)
            ]
        out.append(iface)
    return out


def resources(spec: Mapping[str, Any], num_vfs: Mapping[str, int], prefix: str = RESOURCE_PREFIX) -> dict[str, int]:
    """The device plugin's view: `<prefix>/<resourceName>` = the VFs of each vfGroup that exist."""
    out: dict[str, int] = {}
    for iface in spec.get("interfaces") or ():
        created = int(num_vfs.get(str(iface.get("pciAddress")), 0))
        for group in iface.get("vfGroups") or ():
            name = group.get("resourceName")
            count = _vf_count(group.get("vfRange"), created)
            if name and count:
                key = f"{prefix}/{name}"
                out[key] = out.get(key, 0) + count
    return out


class SriovNetworkNodeStateHandler(Handler):
    """The SR-IOV config daemon and device plugin (see the module docstring)."""

    name = "SriovNetworkNodeState"
    primary = NODE_STATE
    watches: Sequence[Kind] = (NODE,)
    known_faults = SRIOV_FAULTS

    def __init__(self, instance: str | None = None, resource_prefix: str = RESOURCE_PREFIX) -> None:
        self.instance = instance or DEFAULT_INSTANCE
        self.resource_prefix = resource_prefix
        if self.instance != DEFAULT_INSTANCE:
            self.name = f"SriovNetworkNodeState[{self.instance}]"
        self._profiles: dict[str, dict[str, Any] | None] = {}

    def _states_of(self, node: str, cache: Cache) -> list[Key]:
        return [Key.of(s) for s in cache.list(NODE_STATE) if s["metadata"]["name"] == node]

    def map_to_primary(self, obj: Obj, cache: Cache) -> Iterable[Key]:
        if obj.get("kind") != "Node":
            return []
        return self._states_of(obj["metadata"]["name"], cache)

    def keys_for_fault_change(self, nodes: frozenset[str] | None, cache: Cache) -> Iterable[Key] | None:
        if nodes is None:
            return None
        return [k for n in nodes for k in self._states_of(n, cache)]

    def _pfs(self, node: Mapping[str, Any]) -> list[dict[str, Any]]:
        name = labels_of(node).get(PROFILE_LABEL)
        if not name:
            return []
        if name not in self._profiles:
            self._profiles[name] = load_profile(name)
        return profile_pfs(self._profiles[name])

    def _mine(self, node: Mapping[str, Any]) -> list[str] | None:
        mark = instance_mark(node, RESOURCES_ANNOTATION, self.instance)
        return None if mark is None else [str(r) for r in mark.get("resources") or ()]

    def _set_node(self, ctx: Context, node: Obj, want: Mapping[str, int], state_uid: str | None) -> None:
        before = self._mine(node) or []
        changes: dict[str, int | None] = {r: None for r in before if r not in want}
        changes.update(want)
        if changes:
            node = ctx.patch_node_status(node, capacity=changes, allocatable=changes)
        mark = json.dumps({"instance": self.instance, "resources": sorted(want)}) if want else None
        labels = {STATE_LABEL: state_uid} if labels_of(node).get(STATE_LABEL) != state_uid else None
        if annotations_of(node).get(RESOURCES_ANNOTATION) != mark or labels:
            ctx.patch_metadata(node, labels=labels, annotations={RESOURCES_ANNOTATION: mark})

    def reconcile(self, ctx: Context, key: Key) -> float | None:
        node = ctx.get(NODE, key.name)
        if node is None or not in_scope(node, self.instance):
            return None
        state = ctx.primary
        if state is None:
            if self._mine(node) is not None or STATE_LABEL in labels_of(node):
                self._set_node(ctx, node, {}, None)
            return None
        pfs = self._pfs(node)
        status = state.get("status") or {}
        current = {str(i.get("pciAddress")): int(i.get("numVfs") or 0) for i in status.get("interfaces") or ()}
        spec = state.get("spec") or {}
        blocked = FAULT_DRAIN_BLOCKED in ctx.faults_for(node)
        num_vfs, sync_status, error = sync(spec, pfs, current, key.name, blocked)
        want = {
            "interfaces": status_interfaces(pfs, num_vfs),
            "syncStatus": sync_status,
            "lastSyncError": error,
        }
        if status.get("interfaces") != want["interfaces"] or any(
            (status.get(k) or "") != want[k] for k in ("syncStatus", "lastSyncError")
        ):
            ctx.patch_status(state, want)
        self._set_node(ctx, node, resources(spec, num_vfs, self.resource_prefix), state["metadata"].get("uid") or "")
        return None if sync_status == SUCCEEDED else 10.0


__all__ = ["SRIOV_FAULTS", "SriovNetworkNodeStateHandler"]

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
- the config daemon's sync (pkg/daemon/daemon.go Reconcile, pkg/host/internal/sriov/sriov.go): every PF of
  `spec.interfaces` gets its `numVfs` (the kernel's `sriov_numvfs`); a PF the spec no longer names is reset to 0.
  A count above the PF's `sriov_totalvfs` fails as upstream's configSriovPFDevice does, before any write ("cannot
  config SRIOV device: NumVfs (32) is larger than TotalVfs (16)"): in daemon mode the generic plugin's Apply
  returns that error, Reconcile returns it and retries, and the state keeps `syncStatus: InProgress` (set before the
  apply) with the `lastSyncError` it had (v1.6.0 writes `Failed` only in systemd mode); the apply stops at that PF
  (PFs before it in the status order are configured, it and the ones after keep their VFs, the resets are not
  done). *sim*: the simulator writes the refused count and limit into the log, not into the state. A PF the node
  does not have is skipped, as upstream's getConfigureAndReset skips it. An `externallyManaged` PF is not written
  (upstream skips configSriovPFDevice there); *sim*: its VFs are taken to exist as host_prep made them, up to
  `sriov_totalvfs`. Otherwise `syncStatus: Succeeded`, `lastSyncError` empty.
- the device plugin: the node's capacity/allocatable `<prefix>/<resourceName>` = the VFs of each `vfGroups[]` entry
  (its `vfRange`) that exist on the PF, summed over the PFs; prefix `openshift.io` (the standalone chart's
  `operator.resourcePrefix`, which the lab's operator runs with; `_sriov_policy.resource_prefix`). Resources it set
  before and no longer wants are removed (recorded in the node annotation `sim.gpuops.io/sriov-resources`).
- *sim*: when it first reports a state's interfaces it sets the node label `sim.gpuops.io/sriov-state` to the
  state's UID. The operator computes `spec.interfaces` from `status.interfaces` but re-reads them only on a policy
  event, a node label change or its 5-minute resync (controllers/sriovnetworknodepolicy_controller.go): the label
  change makes it re-read them at once, as a policy applied before the config daemon reported would otherwise wait.

Fault (per node, hack/gpuops_lab/simulator/faults.py): `sriov-drain-blocked`: the node's config daemon asks for a
drain before a change that needs one, as upstream does (generic plugin needToUpdateVFs: a PF that has VFs gets a
different count, or loses its policy) and the real operator's drain controller performs it. Without the fault the
simulator applies such a change at once (as with `disableDrain`), so that the other lab nodes are never cordoned.
With it, the handler plays daemon.go handleDrain/annotate: state `InProgress` (lastSyncError kept), annotation
`sriovnetwork.openshift.io/desired-state: Drain_Required` on the state and `sriovnetwork.openshift.io/state:
Drain_Required` on the node; the real drain controller then sets `current-state: Draining`, cordons the node and
evicts the pods that request `<prefix>/*` resources, which a PodDisruptionBudget that allows no disruption refuses
(the API server's eviction check): the drain, and the state, stay there. Once the drain controller writes
`current-state: DrainComplete` the handler applies the change, annotates both `Idle` (the drain controller then
uncordons) and reports `Succeeded`. The drain controller adds the drain annotations (`Idle`) to every state and node;
the handler waits for them only under the fault, as the daemon does before any reconcile.

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
SUCCEEDED, IN_PROGRESS = "Succeeded", "InProgress"
# pkg/consts/constants.go v1.6.0
NODE_DRAIN_ANNOTATION = "sriovnetwork.openshift.io/state"
DESIRED_STATE = "sriovnetwork.openshift.io/desired-state"
CURRENT_STATE = "sriovnetwork.openshift.io/current-state"
DRAIN_IDLE, DRAIN_REQUIRED, DRAINING, DRAIN_COMPLETE = "Idle", "Drain_Required", "Draining", "DrainComplete"
ABOVE_LIMIT_ERROR = "cannot config SRIOV device: NumVfs ({num}) is larger than TotalVfs ({limit})"
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
) -> tuple[dict[str, int], str, list[str]]:
    """The config daemon's apply of `spec.interfaces` (daemon mode): ({pciAddress: numVfs} after it, syncStatus,
    the errors it logs). `current`: the VFs each PF has now (from the last status). PFs are configured in the
    status order; a count above `totalvfs` stops the apply there (`InProgress`, the rest unchanged); the PFs no
    policy names are reset after the others are configured. A spec PF the node lacks is skipped."""
    wanted = {str(i.get("pciAddress")): int(i.get("numVfs") or 0) for i in spec.get("interfaces") or ()}
    result = {p["address"]: int(current.get(p["address"], 0)) for p in pfs}
    for pf in pfs:
        addr = pf["address"]
        if addr not in wanted:
            continue
        limit = int(pf.get("totalvfs") or 0)
        if wanted[addr] > limit:
            name = (pf.get("netdevs") or [""])[0] or "-"
            error = ABOVE_LIMIT_ERROR.format(num=wanted[addr], limit=limit)
            return (
                result,
                IN_PROGRESS,
                [f"configSriovPFDevice(): fail to set NumVfs for device {addr} ({name}): {error}"],
            )
        result[addr] = wanted[addr]
    for addr in result:
        if addr not in wanted:
            result[addr] = 0
    return result, SUCCEEDED, []


def needs_drain(spec: Mapping[str, Any], current: Mapping[str, int]) -> bool:
    """Upstream's generic plugin needToUpdateVFs (the VF part): a PF that has VFs now gets a different count, or no
    policy names it any more (externally managed PFs aside: the operator never changes them)."""
    wanted = {str(i.get("pciAddress")): i for i in spec.get("interfaces") or ()}
    for addr, have in current.items():
        if not have:
            continue
        iface = wanted.get(addr)
        if iface is None or (not iface.get("externallyManaged") and int(iface.get("numVfs") or 0) != have):
            return True
    return False


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
        current = {p["address"]: current.get(p["address"], 0) for p in pfs}
        spec = state.get("spec") or {}
        num_vfs, sync_status, errors = sync(spec, pfs, current)
        drain = FAULT_DRAIN_BLOCKED in ctx.faults_for(node)
        ann = annotations_of(state)
        if drain and (CURRENT_STATE not in ann or DESIRED_STATE not in ann):
            return 2.0  # the daemon waits for the drain controller's annotations
        waiting = drain and (
            ann[CURRENT_STATE] == DRAINING
            or (ann[CURRENT_STATE] != DRAIN_COMPLETE and num_vfs != current and needs_drain(spec, current))
        )
        if waiting:
            num_vfs, sync_status = dict(current), IN_PROGRESS
            if ann[DESIRED_STATE] != DRAIN_REQUIRED:
                node = self._annotate_drain(ctx, node, state, DRAIN_REQUIRED)
        for line in errors:
            ctx.log("%s", line)
        want = {
            "interfaces": status_interfaces(pfs, num_vfs),
            "syncStatus": sync_status,
            # InProgress keeps the last error (daemon.go: "we don't clear the failed status")
            "lastSyncError": "" if sync_status == SUCCEEDED else str(status.get("lastSyncError") or ""),
        }
        if status.get("interfaces") != want["interfaces"] or any(
            (status.get(k) or "") != want[k] for k in ("syncStatus", "lastSyncError")
        ):
            state = ctx.patch_status(state, want)
        if drain and not waiting and sync_status == SUCCEEDED and ann[DESIRED_STATE] != DRAIN_IDLE:
            node = self._annotate_drain(ctx, node, state, DRAIN_IDLE)
        if not waiting:  # the device plugin restarts with the new configuration only after the apply
            uid = state["metadata"].get("uid") or ""
            self._set_node(ctx, node, resources(spec, num_vfs, self.resource_prefix), uid)
        return None if sync_status == SUCCEEDED else 5.0

    @staticmethod
    def _annotate_drain(ctx: Context, node: Obj, state: Obj, value: str) -> Obj:
        """daemon.go annotate(): the node's drain annotation, then the state's desired-state."""
        node = ctx.patch_metadata(node, annotations={NODE_DRAIN_ANNOTATION: value})
        ctx.patch_metadata(state, annotations={DESIRED_STATE: value})
        return node


__all__ = ["SRIOV_FAULTS", "SriovNetworkNodeStateHandler"]

"""GPU sharing as the NVIDIA device plugin and mig-manager do it, as pure functions the ClusterPolicy handler
(nvidia.py) uses. Written from upstream sources, independently of the collection's plugins/module_utils (the
product's rules are tested against this, so the simulator must not share their code).

Device-plugin config (NVIDIA/k8s-device-plugin v0.20.0):

- Selection (cmd/config-manager/main.go updateConfigName): the node label `nvidia.com/device-plugin.config`
  names a file of the ConfigMap (ClusterPolicy `spec.devicePlugin.config.name`, operator namespace); no label ->
  `spec.devicePlugin.config.default`; an entry that does not exist -> the config-manager fails with
  `specified config <name> does not exist` (its init container at pod start, its sidecar on a label change;
  the plugin keeps what it loaded). config-manager watches only the node label (informer on the Node, label
  compared old/new) and signals the plugin (SIGHUP) when the selected file changes: a change of the ConfigMap
  content alone is picked up only when the plugin pod restarts.
- Parsing (api/config/v1/config.go, replicas.go): `version: v1`; `sharing.timeSlicing` / `sharing.mps` need
  `resources`, each with `name` and `replicas` >= 2 ("number of replicas must be >= 2"). The plugin then calls
  DisableResourceNamingInConfig: a per-resource `rename` is ignored and so is `devices` (every device of the
  resource is replicated, with a warning); `renameByDefault` renames to `<name>.shared`.
- Replication (internal/rm/device_map.go updateDeviceMapWithReplicas): a resource listed is advertised as
  devices x replicas under its (re)name; resources not listed keep their devices.
- MPS (cmd/nvidia-device-plugin/main.go, internal/plugin/mps.go): refused with `--mig-strategy=mixed` ("using
  --mig-strategy=mixed is not supported with MPS") and on MIG devices ("sharing using MPS is not supported for
  MIG devices").
- GFD labels (internal/lm/resource.go): `nvidia.com/gpu.replicas` = replicas, `nvidia.com/gpu.sharing-strategy`
  = `time-slicing` | `mps` | `none`, the product gets `-SHARED` when shared and not renamed.

MIG configs (NVIDIA/mig-parted v0.15.0 pkg/mig/builder): mig-manager generates, from the GPU's profiles,
`all-disabled`, `all-enabled` (MIG on, no devices), `all-balanced` (7 slices: 2x1g, 1x2g, 1x3g; 4 slices: 2x1g,
1x2g, base profiles only) and `all-<profile>` with '+' replaced by '.' (the most instances per GPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

DP_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU = "nvidia.com/gpu"
SHARED_SUFFIX = ".shared"


class ConfigError(Exception):
    """The device plugin cannot load its config (the message is the plugin's error)."""


@dataclass(frozen=True)
class Replicated:
    name: str
    rename: str
    replicas: int


@dataclass(frozen=True)
class SharingConfig:
    """A parsed device-plugin config: the active strategy and its replicated resources."""

    strategy: str = "none"  # none | time-slicing | mps
    resources: tuple[Replicated, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "resources": [[r.name, r.rename, r.replicas] for r in self.resources]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> SharingConfig:
        data = data or {}
        return cls(
            str(data.get("strategy") or "none"),
            tuple(Replicated(str(n), str(rn), int(r)) for n, rn, r in data.get("resources") or ()),
        )


NO_SHARING = SharingConfig()


def select_entry(node_labels: Mapping[str, str], default: str | None) -> str:
    """The config name config-manager selects for a node: its label, else the default ('' -> empty config)."""
    return node_labels.get(DP_CONFIG_LABEL) or default or ""


def _replicated(section: Any, where: str) -> tuple[bool, tuple[Replicated, ...]]:
    if not isinstance(section, Mapping):
        raise ConfigError(f"sharing.{where}: expected a mapping")
    rename_by_default = bool(section.get("renameByDefault", False))
    resources = section.get("resources")
    if not resources:
        raise ConfigError("no resources specified")
    out = []
    for res in resources:
        if not isinstance(res, Mapping) or not res.get("name"):
            raise ConfigError("no resource name specified")
        if "replicas" not in res:
            raise ConfigError("no replicas specified")
        replicas = res["replicas"]
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            raise ConfigError(f"cannot unmarshal {replicas!r} into replicas")
        if replicas < 2:
            raise ConfigError("number of replicas must be >= 2")
        name = str(res["name"])
        # DisableResourceNamingInConfig: per-resource rename and devices are ignored
        out.append(Replicated(name, name + SHARED_SUFFIX if rename_by_default else "", replicas))
    return True, tuple(out)


def parse_config(text: str | None) -> SharingConfig:
    """Parse one ConfigMap entry (YAML or JSON) as the device plugin does; ConfigError when it would fail."""
    if not text or not text.strip():
        return NO_SHARING
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"unable to parse config file: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError("unable to parse config file: not a mapping")
    if data.get("version") not in ("v1", None):
        raise ConfigError(f"unknown version: {data.get('version')}")
    sharing = data.get("sharing") or {}
    mps = sharing.get("mps")
    if mps is not None:
        _on, res = _replicated(mps, "mps")
        if any(r.replicas > 1 for r in res):
            return SharingConfig("mps", res)
        return SharingConfig("none", res)
    ts = sharing.get("timeSlicing")
    if ts:
        _on, res = _replicated(ts, "timeSlicing")
        return SharingConfig("time-slicing", res)
    return NO_SHARING


def check_strategy(cfg: SharingConfig, mig_strategy: str, mig_enabled: bool) -> None:
    """Raise ConfigError for what the plugin refuses at start (MPS with mixed or on MIG devices)."""
    if cfg.strategy != "mps":
        return
    if mig_strategy == "mixed":
        raise ConfigError("using --mig-strategy=mixed is not supported with MPS")
    if mig_enabled:
        raise ConfigError("sharing using MPS is not supported for MIG devices")


def replicate(base: Mapping[str, int], cfg: SharingConfig) -> dict[str, int]:
    """Resources the plugin advertises from `base` (resource -> devices) under `cfg`: a listed resource with
    devices becomes devices x replicas under its (re)name (updateDeviceMapWithReplicas)."""
    out = dict(base)
    for res in cfg.resources:
        devices = base.get(res.name, 0)
        if not devices:
            continue
        out.pop(res.name, None)
        name = res.rename or res.name
        out[name] = out.get(name, 0) + devices * res.replicas
    return out


def gfd_sharing_labels(cfg: SharingConfig, product: str) -> dict[str, str]:
    """GFD's replicas / sharing-strategy / product labels for the full-GPU resource under `cfg`."""
    res = next((r for r in cfg.resources if r.name == GPU), None)
    replicas = res.replicas if res is not None else 1
    shared = replicas > 1
    labels = {
        "nvidia.com/gpu.replicas": str(replicas),
        "nvidia.com/gpu.sharing-strategy": cfg.strategy if shared else "none",
    }
    if shared and res is not None and not res.rename:
        labels["nvidia.com/gpu.product"] = f"{product}-SHARED"[:63]
    return labels


# --------------------------------------------------------------------------------------------------
# MIG configs mig-manager v0.15.0 generates
# --------------------------------------------------------------------------------------------------

_BALANCED = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}


def mig_devices(profiles: Mapping[str, int], config: str) -> dict[str, int] | None:
    """MIG devices per GPU (profile -> count) that a generated config makes; {} for all-disabled/all-enabled;
    None when mig-manager has no such config for this GPU (`mig-parted assert --valid-config` fails)."""
    if not profiles:
        return None
    if config in ("all-disabled", "all-enabled"):
        return {}
    if config == "all-balanced":
        slots = max(int(p.split("g.", 1)[0]) for p in profiles)
        formula = _BALANCED.get(slots)
        if not formula:
            return None
        out: dict[str, int] = {}
        for g, count in formula.items():
            base = [p for p in profiles if p.startswith(f"{g}g.") and "+" not in p]
            if not base:
                return None
            out[max(base, key=lambda p: profiles[p])] = count
        return out
    for profile, count in profiles.items():
        if config == "all-" + profile.replace("+", "."):
            return {profile: count}
    return None


def mig_enabled(config: str | None) -> bool:
    return bool(config) and config != "all-disabled"


# --------------------------------------------------------------------------------------------------
# Custom mig-parted configs (ClusterPolicy migManager.config.name; NVIDIA/mig-parted v0.15.0)
# --------------------------------------------------------------------------------------------------
# The ConfigMap's key config.yaml is mounted as /mig-parted-config/config.yaml and CONFIG_FILE points at it
# (gpu-operator v26.7.0 controllers/object_controls.go); mig-manager then uses that file only and generates nothing
# (cmd/nvidia-mig-manager/main.go setupMigConfig). api/spec/v1/spec.go parses it: `version: v1`, `mig-configs`
# name -> non-empty list of {devices: all | [int], mig-enabled: bool (both required), mig-devices (required when
# enabled, none when disabled), device-filter}; unknown fields fail. Applying walks the entries over the GPUs
# (cmd/nvidia-mig-parted/assert WalkSelectedMigConfigForEachGPU: device-filter 0x<device><vendor>, then the
# index); nvidia-smi refuses a profile the GPU lacks or a layout beyond its slices -> state failed.
_ENTRY_KEYS = {"devices", "mig-enabled", "mig-devices", "device-filter"}


def parse_mig_parted(text: str | None) -> dict[str, list[Mapping[str, Any]]]:
    """The mig-configs of a mig-parted config file; ConfigError as `nvidia-mig-parted assert --valid-config`."""
    try:
        data = yaml.safe_load(text or "")
    except yaml.YAMLError as exc:
        raise ConfigError(f"unmarshal error: {exc}") from None
    if not isinstance(data, Mapping) or data.get("version") != "v1":
        raise ConfigError(f"unknown version: {(data or {}).get('version') if isinstance(data, Mapping) else data}")
    configs = data.get("mig-configs")
    extra = set(data) - {"version", "mig-configs"}
    if extra:
        raise ConfigError(f"unexpected field: {sorted(extra)[0]}")
    if not isinstance(configs, Mapping) or not configs:
        raise ConfigError("at least one entry in 'mig-configs' is required")
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"at least one entry in '{name}' is required")
        for entry in entries:
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{name}: an entry is not a mapping")
            for key in ("devices", "mig-enabled"):
                if key not in entry:
                    raise ConfigError(f"missing required field: {key}")
            if set(entry) - _ENTRY_KEYS:
                raise ConfigError(f"unexpected field: {sorted(set(entry) - _ENTRY_KEYS)[0]}")
            devices = entry["devices"]
            if devices != "all" and not (isinstance(devices, list) and all(isinstance(d, int) for d in devices)):
                raise ConfigError(f"invalid string input for 'devices': {devices}")
            if not isinstance(entry["mig-enabled"], bool):
                raise ConfigError("cannot unmarshal mig-enabled")
            mig = entry.get("mig-devices")
            if entry["mig-enabled"] and mig is None:
                raise ConfigError("missing required field 'mig-devices' when 'mig-enabled' is true")
            if not entry["mig-enabled"] and mig:
                raise ConfigError("MIG devices included when 'mig-enabled' is false")
            if mig is not None and (
                not isinstance(mig, Mapping) or any(not isinstance(c, int) or c < 0 for c in mig.values())
            ):
                raise ConfigError("error validating values in 'mig-devices' field")
    return {str(k): list(v) for k, v in configs.items()}


def _filter_matches(entry: Mapping[str, Any], device_id: str) -> bool:
    dfilter = entry.get("device-filter")
    if not dfilter:
        return True
    want = (int(device_id, 16) << 16) | 0x10DE
    for item in [dfilter] if isinstance(dfilter, str) else dfilter:
        try:
            if int(str(item).split(":", 1)[0], 0) == want:
                return True
        except ValueError:
            continue
    return False


def _slices(profile: str, largest_gb: int, memory_slices: int) -> tuple[int, int]:
    """(compute, memory) slices of a profile, from its name: <G>g is the compute slices; the memory slices are its
    share of the GPU's largest profile (7g.80gb: 8 slices of ~10 GB; A30's 4g.24gb: 4 of 6 GB)."""
    g, mem = profile.split("+", 1)[0].split(".", 1)
    return int(g.rstrip("g")), round(int(mem.rstrip("gb")) / (largest_gb / memory_slices))


def custom_mig_devices(
    entries: list[Mapping[str, Any]], profiles: Mapping[str, int], device_id: str, count: int
) -> dict[str, int] | None:
    """MIG devices per GPU a custom config makes on `count` GPUs of PCI device `device_id` with these profiles
    ({} for MIG enabled without devices), None when MIG stays disabled; ConfigError when nvidia-smi would refuse
    (a profile the GPU lacks, more instances or slices than it has) or, *sim*, when the GPUs' layouts differ (the
    simulator advertises one layout per node)."""
    largest = max(profiles, key=lambda p: int(p.split("g.", 1)[0]))
    total_compute = int(largest.split("g.", 1)[0])
    memory_slices = 8 if total_compute == 7 else total_compute
    largest_gb = int(largest.split(".", 1)[1].split("+", 1)[0].rstrip("gb"))
    layouts: list[dict[str, int] | None] = [None] * count
    for entry in entries:
        if not _filter_matches(entry, device_id):
            continue
        for i in range(count):
            if entry["devices"] == "all" or i in entry["devices"]:
                layouts[i] = dict(entry.get("mig-devices") or {}) if entry["mig-enabled"] else None
    for layout in layouts:
        for profile, n in (layout or {}).items():
            if profile not in profiles:
                raise ConfigError(f"Unable to create GPU instance: profile {profile} not supported on this GPU")
            if n > profiles[profile]:
                raise ConfigError(f"Unable to create {n} GPU instances of {profile}: insufficient resources")
        used = [_slices(p, largest_gb, memory_slices) for p, n in (layout or {}).items() for _k in range(n)]
        if sum(c for c, _m in used) > total_compute or sum(m for _c, m in used) > memory_slices:
            raise ConfigError("Unable to create GPU instances: insufficient resources")
    if any(layout != layouts[0] for layout in layouts):
        raise ConfigError("*sim*: GPUs of one node with different MIG layouts are not simulated")
    return {p: n for p, n in (layouts[0] or {}).items() if n} if layouts and layouts[0] is not None else None

"""Paths, versions and ports of the local lab. Everything is computed, nothing happens at import."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HACK = REPO / "hack"
VERSIONS_FILE = HACK / "cluster" / "versions.env"
BUILD_SCRIPT = HACK / "cluster" / "build.sh"
PROFILES_DIR = REPO / "tests" / "fixtures" / "hardware"
CHARTS_DIR = REPO / "tests" / "fixtures" / "charts"
# Upstream charts the lab's chart repository serves in place of a fixture (issue 27 §6): chart name -> the
# versions.env key of its pinned version. hack/cluster/build.sh copies each out of its Go module zip into
# <cache>/charts/<name>-v<version>/<name> (with a SHA256SUMS stamp); charts.py packages it at that version.
# The SR-IOV Network Operator's chart is named sriov-network-operator-chart (deployment/sriov-network-operator-chart).
UPSTREAM_CHARTS = {
    "node-feature-discovery": "NFD_VERSION",
    "sriov-network-operator-chart": "SRIOV_VERSION",
    "kueue": "KUEUE_VERSION",
    "volcano": "VOLCANO_VERSION",
}
# Upstream charts build.sh would fetch the same way for the tests only, while the lab still serves a fixture of the same
# name (tests/unit/charts/test_checked_charts.py): none left - every chart a registry serves is served.
CHECKED_CHARTS: dict[str, str] = {}
LOCAL_INVENTORY = REPO / "inventories" / "local" / "hosts.yml"

# name -> (env var, default)
PORT_DEFAULTS = {
    "etcd": ("GPUOPS_LAB_ETCD_PORT", 23790),
    "etcd-peer": ("GPUOPS_LAB_ETCD_PEER_PORT", 23800),
    "kube-apiserver": ("GPUOPS_LAB_APISERVER_PORT", 16443),
    "kube-controller-manager": ("GPUOPS_LAB_KCM_PORT", 20257),
    "kube-scheduler": ("GPUOPS_LAB_SCHEDULER_PORT", 20259),
    "chart-repo": ("GPUOPS_LAB_CHART_REPO_PORT", 18879),
    # the OCI registry (registry.py); unset, it follows the chart-repo port (+1), as the SR-IOV ports follow nfd-master
    "chart-registry": ("GPUOPS_LAB_CHART_REGISTRY_PORT", 18880),
    "nfd-master": ("GPUOPS_LAB_NFD_MASTER_PORT", 20290),  # its /metrics and /healthz, on loopback
    # the SR-IOV Network Operator's controller-runtime servers, on loopback; unset, they follow the nfd-master port
    # (+1, +2), so a lab whose ports are all shifted by one offset needs no new variable
    "sriov-metrics": ("GPUOPS_LAB_SRIOV_METRICS_PORT", 20291),
    "sriov-probe": ("GPUOPS_LAB_SRIOV_PROBE_PORT", 20292),
    # the real Kueue controller's webhook, metrics, health probe and visibility API servers (kueue.py), on loopback;
    # unset, they follow the nfd-master port (+3, +4, +5, +10) as the SR-IOV ports do
    "kueue-webhook": ("GPUOPS_LAB_KUEUE_WEBHOOK_PORT", 20293),
    "kueue-metrics": ("GPUOPS_LAB_KUEUE_METRICS_PORT", 20294),
    "kueue-probe": ("GPUOPS_LAB_KUEUE_PROBE_PORT", 20295),
    "kueue-visibility": ("GPUOPS_LAB_KUEUE_VISIBILITY_PORT", 20300),
    # the real Volcano scheduler's metrics and healthz servers (volcano.py), on loopback; unset, they follow the
    # nfd-master port (+6, +7) as the Kueue ports do
    "volcano-metrics": ("GPUOPS_LAB_VOLCANO_METRICS_PORT", 20296),
    "volcano-healthz": ("GPUOPS_LAB_VOLCANO_HEALTHZ_PORT", 20297),
    # the real Volcano controller-manager's metrics and healthz servers (volcano.py), on loopback; unset, they follow
    # the nfd-master port (+8, +9)
    "volcano-cm-metrics": ("GPUOPS_LAB_VOLCANO_CM_METRICS_PORT", 20298),
    "volcano-cm-healthz": ("GPUOPS_LAB_VOLCANO_CM_HEALTHZ_PORT", 20299),
    # the real Volcano admission webhook's server and its healthz (HTTPS), on loopback; unset, they follow the
    # nfd-master port (+11, +12)
    "volcano-admission": ("GPUOPS_LAB_VOLCANO_ADMISSION_PORT", 20301),
    "volcano-admission-healthz": ("GPUOPS_LAB_VOLCANO_ADMISSION_HEALTHZ_PORT", 20302),
}


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


# Linux picks the local port of every outgoing connection from this range, so a lab port inside it is taken at
# random by whatever connects at the time the lab starts (stop 20's CI: etcd's peer port 32800)
EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def ephemeral_range(path: str | Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range; Linux's default (32768-60999) where the file cannot be read."""
    try:
        low, high = (int(x) for x in Path(path).read_text(encoding="utf-8").split()[:2])
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def refuse_ephemeral(named: dict[str, int], range_file: str | Path = EPHEMERAL_RANGE_FILE) -> None:
    """Raise a LabError naming every port (label -> port) inside the kernel's ephemeral range."""
    low, high = ephemeral_range(range_file)
    inside = sorted(label for label, port in named.items() if low <= port <= high)
    if inside:
        from .errors import LabError

        raise LabError(
            f"{', '.join(inside)}: inside the kernel's ephemeral port range {low}-{high} ({EPHEMERAL_RANGE_FILE}); "
            f"any outgoing connection may hold such a port when the lab starts; choose ports below {low} "
            f"(or above {high})"
        )


@dataclass(frozen=True)
class LabConfig:
    state: Path
    cache: Path
    versions: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, env: dict[str, str] | None = None) -> LabConfig:
        env = dict(os.environ if env is None else env)
        state = Path(env.get("GPUOPS_LAB_STATE", REPO / ".state" / "lab"))
        cache = Path(env.get("GPUOPS_CACHE", Path.home() / ".cache" / "gpuops"))
        ports = {}
        follow = {
            "sriov-metrics": ("nfd-master", 1),
            "sriov-probe": ("nfd-master", 2),
            "kueue-webhook": ("nfd-master", 3),
            "kueue-metrics": ("nfd-master", 4),
            "kueue-probe": ("nfd-master", 5),
            "kueue-visibility": ("nfd-master", 10),
            "volcano-metrics": ("nfd-master", 6),
            "volcano-healthz": ("nfd-master", 7),
            "volcano-cm-metrics": ("nfd-master", 8),
            "volcano-cm-healthz": ("nfd-master", 9),
            "volcano-admission": ("nfd-master", 11),
            "volcano-admission-healthz": ("nfd-master", 12),
            "chart-registry": ("chart-repo", 1),
        }
        for name, (var, default) in PORT_DEFAULTS.items():
            lead, plus = follow.get(name, (None, 0))
            lead_var = PORT_DEFAULTS[lead][0] if lead else ""
            if lead and var not in env and str(env.get(lead_var, "")).isdigit():
                default = int(env[lead_var]) + plus
            raw = env.get(var, str(default))
            if not raw.isdigit() or not 0 < int(raw) < 65536:
                from .errors import LabError

                raise LabError(f"{var}={raw!r} is not a TCP port number (1-65535); unset it or fix it")
            ports[name] = int(raw)
        refuse_ephemeral(
            {f"{PORT_DEFAULTS[n][0]}={p} ({n})": p for n, p in ports.items()},
            env.get("GPUOPS_LAB_EPHEMERAL_RANGE_FILE", EPHEMERAL_RANGE_FILE),
        )
        return cls(state=state, cache=cache, versions=read_versions(), ports=ports)

    # binaries, built by hack/cluster/build.sh outside the repository
    def bindir(self, component: str) -> Path:
        key = {
            "k8s": "K8S_VERSION",
            "etcd": "ETCD_VERSION",
            "kwok": "KWOK_VERSION",
            "helm": "HELM_VERSION",
            "nfd": "NFD_VERSION",
            "sriov-network-operator": "SRIOV_VERSION",
            "registry": "REGISTRY_VERSION",
            "kueue": "KUEUE_VERSION",
            "volcano": "VOLCANO_VERSION",
            "prometheus": "PROMETHEUS_VERSION",
        }[component]
        return self.cache / "bin" / f"{component}-v{self.versions[key]}"

    def upstream_chart_dir(self, name: str) -> Path:
        """The unpacked upstream chart `name` (UPSTREAM_CHARTS or CHECKED_CHARTS) in the build cache."""
        return self.cache / "charts" / f"{name}-v{self.upstream_chart_version(name)}" / name

    def upstream_chart_version(self, name: str) -> str:
        return self.versions[{**UPSTREAM_CHARTS, **CHECKED_CHARTS}[name]]

    def binary(self, name: str) -> Path:
        component = {
            "kube-apiserver": "k8s",
            "kube-controller-manager": "k8s",
            "kube-scheduler": "k8s",
            "kubectl": "k8s",
            "etcd": "etcd",
            "kwok": "kwok",
            "helm": "helm",
            "nfd-master": "nfd",
            "sriov-network-operator": "sriov-network-operator",
            "registry": "registry",
            "kueue": "kueue",
            "vc-scheduler": "volcano",
            "vc-controller-manager": "volcano",
            "vc-webhook-manager": "volcano",
            "gen-admission-secret.sh": "volcano",
            "prometheus": "prometheus",
            "promtool": "prometheus",
        }[name]
        return self.bindir(component) / name

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def run(self) -> Path:
        return self.state / "run"

    @property
    def hosts(self) -> Path:
        """Simulated hosts (root filesystems + python wrappers) of the inventory's nodes."""
        return self.state / "hosts"

    @property
    def chart_repo_dir(self) -> Path:
        return self.state / "chart-repo"

    @property
    def chart_repo_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['chart-repo']}"

    @property
    def chart_registry_dir(self) -> Path:
        """The OCI registry's storage."""
        return self.state / "chart-registry"

    @property
    def chart_registry_config(self) -> Path:
        return self.state / "chart-registry.json"

    @property
    def chart_registry_url(self) -> str:
        """The oci:// repository the fixture charts are pushed to (oci://127.0.0.1:<port>/charts/<chart>)."""
        return f"oci://127.0.0.1:{self.ports['chart-registry']}/charts"

    @property
    def apiserver_url(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

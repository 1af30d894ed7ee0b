"""charts.py: the lab's chart repository packages the upstream charts from the build cache at their pinned versions
(config.UPSTREAM_CHARTS) and the fixture charts, an upstream chart replacing a fixture copy of the same name and
version; missing_upstream() names an upstream chart the cache lacks, so `lab build` runs build.sh."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gpuops_lab import charts, nfd, sriov
from gpuops_lab.config import CHECKED_CHARTS, UPSTREAM_CHARTS, LabConfig
from gpuops_lab.errors import LabError


def _cfg(tmp_path: Path) -> LabConfig:
    return LabConfig.load({"GPUOPS_LAB_STATE": str(tmp_path / "state"), "GPUOPS_CACHE": str(tmp_path / "cache")})


def _chart(path: Path, name: str, version: str) -> Path:
    path.mkdir(parents=True)
    (path / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
    return path


SRIOV = "sriov-network-operator-chart"


def _cache_nfd(cfg: LabConfig, crds: str = "") -> Path:
    chart = _chart(cfg.upstream_chart_dir("node-feature-discovery"), "node-feature-discovery", "0.2.1")
    (chart.parent / "SHA256SUMS").write_text("")
    if crds:
        (chart / "crds").mkdir()
        (chart / "crds" / "nfd-api-crds.yaml").write_text(crds)
    return chart


def _cache_kueue(cfg: LabConfig) -> Path:
    """Upstream's Kueue chart: its Chart.yaml in git carries the release version."""
    chart = _chart(cfg.upstream_chart_dir("kueue"), "kueue", cfg.versions["KUEUE_VERSION"])
    (chart.parent / "SHA256SUMS").write_text("")
    return chart


def _cache_volcano(cfg: LabConfig) -> Path:
    """Upstream's Volcano chart: its Chart.yaml in git carries the release version."""
    chart = _chart(cfg.upstream_chart_dir("volcano"), "volcano", cfg.versions["VOLCANO_VERSION"])
    (chart.parent / "SHA256SUMS").write_text("")
    return chart


def _cache_sriov(cfg: LabConfig) -> Path:
    """Upstream's SR-IOV chart as its git tree has it: version 0.0.0-dev, the release stamps the real one."""
    chart = _chart(cfg.upstream_chart_dir(SRIOV), SRIOV, "0.0.0-dev")
    (chart.parent / "SHA256SUMS").write_text("")
    return chart


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("node-feature-discovery", "NFD_VERSION"),
        ("sriov-network-operator-chart", "SRIOV_VERSION"),
        ("kueue", "KUEUE_VERSION"),
        ("volcano", "VOLCANO_VERSION"),
    ],
)
def test_upstream_charts_are_in_the_cache_at_the_pinned_version(tmp_path, name, key):
    cfg = _cfg(tmp_path)
    assert UPSTREAM_CHARTS == {
        "node-feature-discovery": "NFD_VERSION",
        SRIOV: "SRIOV_VERSION",
        "kueue": "KUEUE_VERSION",
        "volcano": "VOLCANO_VERSION",
    }
    assert cfg.upstream_chart_version(name) == cfg.versions[key]
    assert cfg.upstream_chart_dir(name) == tmp_path / "cache" / "charts" / f"{name}-v{cfg.versions[key]}" / name


def test_missing_upstream_names_the_chart_until_it_is_cached_with_its_stamp(tmp_path):
    cfg = _cfg(tmp_path)
    served = ["node-feature-discovery chart", f"{SRIOV} chart", "kueue chart", "volcano chart"]
    assert charts.missing_upstream(cfg) == served
    assert charts.missing_upstream(cfg, checked=False) == served  # the demo's build: every served chart too
    chart = _cache_nfd(cfg)
    assert charts.missing_upstream(cfg, checked=False) == [f"{SRIOV} chart", "kueue chart", "volcano chart"]
    _cache_sriov(cfg)
    _cache_kueue(cfg)
    _cache_volcano(cfg)
    assert charts.missing_upstream(cfg) == []
    (chart.parent / "SHA256SUMS").unlink()
    assert charts.missing_upstream(cfg) == ["node-feature-discovery chart"]


def test_no_chart_is_only_checked_any_more():
    """Issue 27 §6: every upstream chart a registry serves is the one the lab serves (Volcano's was the last read by
    the tests only, beside a fixture)."""
    from gpuops_lab.config import CHARTS_DIR

    assert CHECKED_CHARTS == {}
    names = {yaml.safe_load(p.read_text())["name"] for p in CHARTS_DIR.glob("*/Chart.yaml")}  # (not vendored subcharts)
    assert names and not names & set(UPSTREAM_CHARTS)


def test_package_argvs_upstream_last_at_its_version_and_replacing_the_fixture_copy(tmp_path):
    cfg = _cfg(tmp_path)
    version = cfg.versions["NFD_VERSION"]
    upstream = _cache_nfd(cfg)
    sriov_chart = _cache_sriov(cfg)
    kueue_chart = _cache_kueue(cfg)
    volcano_chart = _cache_volcano(cfg)
    fixtures = tmp_path / "fixtures"
    parent = _chart(fixtures / "gpu-operator", "gpu-operator", "v26.7.0")
    same = _chart(parent / "charts" / "node-feature-discovery", "node-feature-discovery", version)
    older = _chart(fixtures / "amd" / "charts" / "node-feature-discovery", "node-feature-discovery", "0.18.3")
    out = tmp_path / "repo"
    argvs = charts.package_argvs(cfg, out, fixtures)
    helm = str(cfg.binary("helm"))
    assert [a[2] for a in argvs] == [
        str(older),
        str(parent),
        str(upstream),
        str(sriov_chart),
        str(kueue_chart),
        str(volcano_chart),
    ]
    assert str(same) not in [a[2] for a in argvs]  # the upstream chart of that name and version replaces it
    assert argvs[-4] == [
        helm,
        "package",
        str(upstream),
        "--version",
        version,
        "--app-version",
        f"v{version}",
        "--destination",
        str(out),
    ]
    assert argvs[0] == [helm, "package", str(older), "--destination", str(out)]
    # upstream's release (hack/release/chart-update.sh) stamps version 1.6.0 and appVersion v1.6.0; so does the lab
    sriov_version = cfg.versions["SRIOV_VERSION"]
    assert argvs[-3][3:7] == ["--version", sriov_version, "--app-version", f"v{sriov_version}"]
    kueue_version = cfg.versions["KUEUE_VERSION"]
    assert argvs[-2][3:7] == ["--version", kueue_version, "--app-version", f"v{kueue_version}"]
    volcano_version = cfg.versions["VOLCANO_VERSION"]
    assert argvs[-1][3:7] == ["--version", volcano_version, "--app-version", f"v{volcano_version}"]


def test_the_sriov_fixture_chart_is_gone_and_upstream_is_packaged_in_its_place(tmp_path):
    """Issue 27 §6: no fixture chart of that name remains; the network-operator fixture's bundled subchart (named
    sriov-network-operator, no registry serves the network-operator chart) stays."""
    from gpuops_lab.config import CHARTS_DIR

    names = {yaml.safe_load(p.read_text())["name"] for p in CHARTS_DIR.glob("**/Chart.yaml")}
    assert SRIOV not in names and "sriov-network-operator" in names


def test_package_argvs_refuse_a_missing_upstream_chart(tmp_path):
    with pytest.raises(LabError, match=r"(?s)upstream chart node-feature-discovery .*build\.sh all"):
        charts.package_argvs(_cfg(tmp_path), tmp_path / "repo", tmp_path / "fixtures")
    cfg = _cfg(tmp_path)
    _cache_nfd(cfg)
    with pytest.raises(LabError, match=rf"(?s)upstream chart {SRIOV} 1\.6\.0 .*build\.sh all"):
        charts.package_argvs(cfg, tmp_path / "repo", tmp_path / "fixtures")


CRDS = """---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: nodefeatures.nfd.k8s-sigs.io}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: nodefeaturerules.nfd.k8s-sigs.io}
"""


def test_nfd_crds_come_from_the_upstream_chart_in_the_cache(tmp_path):
    cfg = _cfg(tmp_path)
    with pytest.raises(LabError, match=r"(?s)no NFD CRDs.*build\.sh nfd-chart"):
        nfd.crd_files(cfg)
    chart = _cache_nfd(cfg, CRDS)
    assert nfd.crd_files(cfg) == [chart / "crds" / "nfd-api-crds.yaml"]
    assert [(path.name, doc["metadata"]["name"]) for path, doc in nfd.crd_manifests(cfg)] == [
        ("nfd-api-crds.yaml", "nodefeatures.nfd.k8s-sigs.io"),
        ("nfd-api-crds.yaml", "nodefeaturerules.nfd.k8s-sigs.io"),
    ]


NIC_IDS = """apiVersion: v1
kind: ConfigMap
metadata:
  name: supported-nic-ids
data:
  Nvidia_mlx5_ConnectX-7: "15b3 1021 101e"
  {{- range .Values.supportedExtraNICs }}
  {{ . }}
  {{- end }}
"""


def test_sriov_crds_and_nic_ids_come_from_the_upstream_chart_in_the_cache(tmp_path):
    cfg = _cfg(tmp_path)
    with pytest.raises(LabError, match=r"(?s)no SR-IOV Network Operator CRDs.*build\.sh sriov-chart"):
        sriov.crd_files(cfg)
    with pytest.raises(LabError, match=r"(?s)configmap\.yaml.*build\.sh sriov-chart"):
        sriov.nic_ids_configmap(sriov.chart_dir(cfg) / "templates" / "configmap.yaml")
    chart = _cache_sriov(cfg)
    (chart / "crds").mkdir()
    (chart / "crds" / "sriovnetwork.openshift.io_sriovnetworks.yaml").write_text(CRDS)
    (chart / "templates").mkdir()
    (chart / "templates" / "configmap.yaml").write_text(NIC_IDS)
    assert sriov.chart_dir(cfg) == chart
    assert sriov.crd_files(cfg) == [chart / "crds" / "sriovnetwork.openshift.io_sriovnetworks.yaml"]
    cm = sriov.nic_ids_configmap(chart / "templates" / "configmap.yaml")
    assert cm["data"] == {"Nvidia_mlx5_ConnectX-7": "15b3 1021 101e"}

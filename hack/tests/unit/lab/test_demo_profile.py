"""`make demo` builds and starts only what the demo uses (GPUOPS_LAB_PROFILE=demo, cluster.DEMO_SKIPS); without the
profile the lab is whole. The skipped parts must be ones the demo inventory does not enable."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from gpuops_lab import cluster
from gpuops_lab.config import REPO, LabConfig


def test_the_demo_profile_skips_the_registry_sriov_and_volcano(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUOPS_LAB_STATE", str(tmp_path / "lab"))
    lab = cluster.Lab(LabConfig.load(), say=lambda _msg: None)
    monkeypatch.delenv("GPUOPS_LAB_PROFILE", raising=False)
    assert lab.components() == cluster.ORDER
    monkeypatch.setenv("GPUOPS_LAB_PROFILE", "demo")
    demo = lab.components()
    assert set(cluster.ORDER) - set(demo) == set(cluster.DEMO_SKIPS)
    assert [n for n in cluster.ORDER if n in demo] == list(demo)  # the same start order
    assert set(lab.status()) == set(demo)
    skipped = {b for bs in cluster.DEMO_SKIPS.values() for b in bs} | set(cluster.DEMO_SKIPPED_BINARIES)
    assert not skipped & set(lab.binaries_ready())
    assert {"vc-scheduler", "vc-controller-manager", "vc-webhook-manager"} <= set(cluster.DEMO_SKIPPED_BINARIES)


def test_the_build_script_has_a_demo_target_without_the_skipped_builds():
    text = (REPO / "hack" / "cluster" / "build.sh").read_text()
    (line,) = re.findall(r"^  demo\) (.*) ;;$", text, re.M)
    steps = [s.strip() for s in line.split(";")]
    assert "build_volcano" not in steps and "build_sriov" not in steps and "build_registry" not in steps
    # the upstream charts are fetched in demo too: the chart repository packages every one (gpuops_lab.charts)
    for needed in ("build_k8s", "build_nfd", "build_kueue", "build_prometheus", "build_helm", "build_nfd_chart"):
        assert needed in steps
    assert "build_sriov_chart" in steps and "build_volcano_chart" in steps


def test_the_demo_inventory_enables_nothing_the_demo_profile_skips():
    group_vars = Path(REPO / "inventories" / "local" / "group_vars")
    merged: dict = {}
    for f in sorted(group_vars.glob("*.yml")):
        merged.update(yaml.safe_load(f.read_text()) or {})
    assert not merged.get("gpuops_sriov_network_operator_managed", False)
    assert "volcano" not in (merged.get("gpuops_batch_schedulers") or [])
    assert not str(merged.get("gpuops_chart_repo_mirror", "")).strip().startswith("oci://")

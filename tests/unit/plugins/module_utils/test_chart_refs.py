"""The value keys a chart knows (plugins/module_utils/release/_chart_refs.py): values.yaml plus the .Values paths its
templates read, so a key upstream documents only as a comment is not reported as ignored (issue 27)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpuops.platform.plugins.filter.unknown_keys import unknown_keys
from ansible_collections.gpuops.platform.plugins.module_utils.release import _chart_refs

CHARTS = Path(__file__).resolve().parents[3] / "fixtures" / "charts"
GPU_OP = CHARTS / "gpu-operator" / "v26.7.0"


@pytest.mark.parametrize(
    ("user", "unknown"),
    [
        ({"dcgmExporter": {"config": {"name": "gpuops-dcgm-exporter-metrics"}}}, []),  # read by the templates only
        ({"dcgmExporter": {"confg": {"name": "x"}}}, ["dcgmExporter.confg"]),
        ({"driver": {"version": "595.91.07", "verison": "x"}}, ["driver.verison"]),
        ({"node-feature-discovery": {"worker": {"tolerations": []}}}, []),  # a subchart's values.yaml key
    ],
)
def test_gpu_operator_keys_from_values_and_templates(user, unknown):
    assert unknown_keys(user, _chart_refs.known_values(str(GPU_OP))) == unknown


def test_template_paths_and_their_merge(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "values.yaml").write_text("a:\n  b: 1\nlist: [1]\n")
    (tmp_path / "templates" / "x.tpl").write_text(
        "{{ .Values.a.c }} {{ $.Values.d.e.f }} {{ .Values.list.x }} {{ .Release.Name }} {{ $x.Values.y }}\n"
    )
    (tmp_path / "templates" / "notes.md").write_text("{{ .Values.ignored }}")  # not a template suffix
    assert _chart_refs.template_value_paths(str(tmp_path)) == {("a", "c"), ("d", "e", "f"), ("list", "x")}
    assert _chart_refs.known_values(str(tmp_path)) == {"a": {"b": 1, "c": None}, "list": [1], "d": {"e": {"f": None}}}


def test_a_key_read_deeper_knows_only_the_keys_read_there(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "values.yaml").write_text("dcgmExporter:\n  enabled: true\n")
    (tmp_path / "templates" / "x.tpl").write_text(
        "{{ if .Values.dcgmExporter.config }}{{ .Values.dcgmExporter.config.name }}"
    )
    known = _chart_refs.known_values(str(tmp_path))
    assert unknown_keys({"dcgmExporter": {"config": {"name": "x"}}}, known) == []
    assert unknown_keys({"dcgmExporter": {"config": {"nam": "x"}}}, known) == ["dcgmExporter.config.nam"]


def test_a_sub_subcharts_reads_are_known_under_its_names(tmp_path):
    sub = tmp_path / "charts" / "a" / "charts" / "b"
    (sub / "templates").mkdir(parents=True)
    (tmp_path / "charts" / "a" / "Chart.yaml").write_text("name: a\nversion: 1.0.0\n")
    (sub / "Chart.yaml").write_text("name: b\nversion: 1.0.0\n")
    (sub / "templates" / "x.tpl").write_text("{{ .Values.deep.key }}")
    known = _chart_refs.known_values(str(tmp_path))
    assert unknown_keys({"a": {"b": {"deep": {"key": 1}}}}, known) == []
    assert unknown_keys({"a": {"b": {"deep": {"kye": 1}}}}, known) == ["a.b.deep.kye"]

"""Patterns that validate a whole value end at the end of the text (``\\Z``), never at ``$``: Python's ``$`` also
matches before a trailing newline, so ``re.match(r"^[0-9.]+$", "570.124.06\\n")`` accepts a value with a newline
that then reaches an image tag, a chart version or a sysfs path (issue 27)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.gpuops.platform.plugins.module_utils.host import _pci, _sriov
from ansible_collections.gpuops.platform.plugins.module_utils.inputs import _inputs

REPO = Path(__file__).resolve().parents[2]
# A regular expression literal handed to re.compile/match/search/fullmatch whose last character is an unescaped $.
_DOLLAR_END = re.compile(r"re\.(?:compile|match|search|fullmatch)\(\s*r?f?r?([\"'])(?:(?!\1).)*(?<!\\)\$\1", re.S)


def test_no_pattern_in_plugins_ends_with_dollar():
    offenders = []
    for path in sorted((REPO / "plugins").rglob("*.py")):
        for m in _DOLLAR_END.finditer(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(REPO)}: {m.group(0)[:60]}")
    assert offenders == []


@pytest.mark.parametrize(
    ("rule", "var", "value"),
    [
        (_inputs.nvidia_driver_version, "gpu_operator_driver_version", "570.124.06\n"),
        (_inputs.amd_driver_version, "amd_gpu_operator_driver_version", "30.20.1\n"),
        (_inputs.chart_version, "gpu_operator_chart_version", "v26.7.0\n"),
        (_inputs.dns1123_label, "gpu_operator_namespace", "gpu-operator\n"),
        (_inputs.release_name, "gpu_operator_release_name", "gpu-operator\n"),
        (_inputs.url, "gpuops_chart_repo_mirror", "https://charts.example.internal\n"),
    ],
)
def test_a_trailing_newline_is_refused(rule, var, value):
    assert rule(var, value.rstrip("\n")) == []
    found = rule(var, value)
    assert [f["object"]["name"] for f in found] == [var]


@pytest.mark.parametrize("text", ["0000:12:00.1\n", "0000:12:00.1\n\n"])
def test_a_pci_address_with_a_newline_is_not_an_address(text):
    assert _pci.is_address(text.rstrip("\n"))
    assert not _pci.is_address(text)


def test_a_netdev_with_a_newline_is_not_a_netdev():
    assert _sriov.NETDEV_RE.match("ens1f0np0")
    assert not _sriov.NETDEV_RE.match("ens1f0np0\n")

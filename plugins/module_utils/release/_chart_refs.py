# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The value keys a chart knows: its ``values.yaml`` (subcharts' under their name, ``_helm_release``) and the
``.Values`` paths its templates read. A key the templates read but values.yaml leaves out (gpu-operator v26.7.0's
``dcgmExporter.config``, present in values.yaml only as a comment) is a key of the chart, not a misspelling."""

from __future__ import annotations

import os
import re
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.release._helm_release import chart_default_values

# .Values.a.b.c and $.Values.a.b (identifier segments only; index/pluck and dynamic keys are not followed)
_REF = re.compile(r"(?<![\w.])\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_-]*)+)")
_TEMPLATE_SUFFIXES = (".yaml", ".yml", ".tpl", ".txt", ".json")


def template_value_paths(chart_dir: str) -> set[tuple[str, ...]]:
    """The ``.Values`` paths the chart's own templates read (not its subcharts')."""
    out: set[tuple[str, ...]] = set()
    templates = os.path.join(chart_dir, "templates")
    for root, _dirs, files in os.walk(templates):
        for name in files:
            if not name.endswith(_TEMPLATE_SUFFIXES):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            out |= {tuple(m.group(1)[1:].split(".")) for m in _REF.finditer(text)}
    return out


def _tree(paths: set[tuple[str, ...]]) -> dict[str, Any]:
    """Paths as a nested mapping; a path nothing deeper is read below is an empty mapping."""
    root: dict[str, Any] = {}
    for path in paths:
        node = root
        for key in path:
            node = node.setdefault(key, {})
    return root


def _merge(values: dict[str, Any], reads: dict[str, Any]) -> None:
    """Add what the templates read to the values where values.yaml leaves it out: a key read with nothing read
    below it is null (any keys below it are accepted); a key read deeper knows only the keys read there."""
    for key, below in reads.items():
        if key not in values:
            values[key] = None
            if below:
                values[key] = {}
                _merge(values[key], below)
        elif isinstance(values[key], dict) and values[key] and below:
            _merge(values[key], below)
        # a scalar, list or empty mapping default: what a template reads below it is not a key of values.yaml


def known_values(chart_dir: str) -> dict[str, Any]:
    """``chart_default_values`` plus every ``.Values`` path the templates read, the chart's and its subcharts' at
    any depth (a subchart's paths under its name, as Helm passes it its values)."""
    values = chart_default_values(chart_dir)
    _add_reads(values, chart_dir)
    return values


def _add_reads(values: dict[str, Any], chart_dir: str) -> None:
    import yaml

    _merge(values, _tree(template_value_paths(chart_dir)))
    charts = os.path.join(chart_dir, "charts")
    for sub in sorted(os.listdir(charts)) if os.path.isdir(charts) else []:
        sub_dir = os.path.join(charts, sub)
        try:
            with open(os.path.join(sub_dir, "Chart.yaml"), encoding="utf-8") as f:
                meta = yaml.safe_load(f) or {}
        except OSError:
            continue
        name = meta.get("name") if isinstance(meta, dict) else None
        sub_values = values.setdefault(name, {}) if name else None
        if isinstance(sub_values, dict):
            _add_reads(sub_values, sub_dir)

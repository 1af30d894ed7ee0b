# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Kubernetes label selectors, client-side: parsed from their string form and matched against the labels of the one
node list the cluster status reads. Pure functions (no I/O).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput

# -- label selectors (client-side, on the one node list) ----------------------------------------------------
_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"^(?P<neg>!?)\s*(?P<key>{_KEY})\Z")
_EQUALITY = re.compile(rf"^(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\Z")
_SET = re.compile(rf"^(?P<key>{_KEY})\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)\Z")


def _split_requirements(text: str) -> list[str]:
    parts: list[str]
    cur: list[str]
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def parse_selector(text: Any) -> list[tuple[str, str, set[str]]] | None:
    """A Kubernetes label selector (``a=b,c!=d,e,!f,g in (x,y),h notin (z)``) as a list of
    (key, operator, values) requirements; None for no selector. InvalidInput when malformed."""
    if text is None or not str(text).strip():
        return None
    reqs = []
    for part in _split_requirements(str(text)):
        m = _SET.match(part)
        if m:
            values = {v.strip() for v in m.group("values").split(",") if v.strip()}
            reqs.append((m.group("key"), m.group("op"), values))
            continue
        m = _EQUALITY.match(part)
        if m:
            reqs.append((m.group("key"), "!=" if m.group("op") == "!=" else "=", {m.group("value")}))
            continue
        m = _EXISTS.match(part)
        if m:
            reqs.append((m.group("key"), "!" if m.group("neg") else "exists", set()))
            continue
        raise InvalidInput(
            f"node_selector {text!r}: cannot parse requirement {part!r}; use Kubernetes label selector syntax, "
            "for example 'nvidia.com/gpu.present=true,pool in (train,infer)'",
            node_selector=text,
        )
    return reqs


def selector_matches(reqs: Iterable[tuple[str, str, set[str]]], labels: Mapping[str, Any]) -> bool:
    for key, op, values in reqs:
        have = key in labels
        value = labels.get(key)
        ok = {
            "=": have and value in values,
            "in": have and value in values,
            "!=": not have or value not in values,
            "notin": not have or value not in values,
            "exists": have,
            "!": not have,
        }[op]
        if not ok:
            return False
    return True

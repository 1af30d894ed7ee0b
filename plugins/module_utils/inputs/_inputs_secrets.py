# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Secret role variables, once: which variables hold secrets, the strings in them, and the masked copy of a value a
finding or a report may show. Pure functions (no I/O).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.inputs._inputs import Finding, a, kind_of, show

MASK = "********"
# A chart value whose key names a credential: Helm stores every value in the release (``helm get values -a`` shows it
# to anyone who may read the release's Secret). Keys that name a Secret (existingSecret, secretName, ...Ref) are not.
_SECRET_KEY = re.compile(
    r".*(password|passwd|passphrase|token|api[-_]?key|secret[-_]?key|access[-_]?key|private[-_]?key)\Z", re.I
)


def secret_variables(options: Mapping[str, Mapping[str, Any]] | None) -> set[str]:
    """The variables an argument spec marks ``no_log``."""
    return {name for name, opt in (options or {}).items() if isinstance(opt, Mapping) and opt.get("no_log")}


def secret_strings(value: Any) -> list[str]:
    """The strings a secret value shows in a message: the value as shown, each string in it, longest first."""
    out = {show(value)} if value not in (None, "") else set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str) and v:
            out.add(v)
        elif isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return sorted(out, key=len, reverse=True)


def masked(findings: list[Finding], secrets: Mapping[str, Any]) -> list[Finding]:
    """Findings with every secret value replaced by ``********``: the evidence of a finding about a secret
    variable says its kind, never its value, and no other text carries it either."""
    texts = [s for value in secrets.values() for s in secret_strings(value) if len(s) >= 3]
    out = []
    for f in findings:
        f = dict(f)
        name = str(f.get("object", {}).get("name", ""))
        base = re.split(r"[.\[]", name)[0]
        if base in secrets:
            f["evidence"] = [f"{name}: {MASK} ({a(kind_of(secrets[base]))}, not shown: the variable is a secret)"]
        for key in ("evidence", "cause", "fix"):
            for s in texts:
                if key == "evidence":
                    f[key] = [e.replace(s, MASK) for e in f[key]]
                else:
                    f[key] = str(f[key]).replace(s, MASK)
        out.append(f)
    return out


def secret_values(var: str, user_values: Any, instead: Mapping[str, str] | None = None) -> list[Finding]:
    """Warnings for user chart values whose key names a credential (``grafana.adminPassword``): the value is stored
    in the Helm release, readable with ``helm get values -a``. ``instead`` maps a dotted key to the variable that
    keeps it in a Kubernetes Secret."""
    out: list[Finding] = []
    stack: list[tuple[str, Any]] = [("", user_values)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
            continue
        key = path.rsplit(".", 1)[-1]
        if not (_SECRET_KEY.match(key) and isinstance(value, str) and value):
            continue
        better = (instead or {}).get(path)
        fix = (
            f"remove {var}.{path} and set {better} (no_log: the role keeps it in a Secret and names that in the chart)"
            if better
            else f"keep the credential in a Kubernetes Secret and give the chart the Secret's name (most charts have "
            f"an existingSecret key for {key}), or vault the variable at least"
        )
        out.append(
            {
                "id": "value-secret-in-release",
                "severity": "warning",
                "object": {"kind": "variable", "name": f"{var}.{path}"},
                "evidence": [f"{var}.{path}: {MASK}"],
                "cause": "The key names a credential: Helm stores every value in the release, where anyone who may "
                "read the release (helm get values -a) reads it.",
                "fix": fix + ".",
            }
        )
    return sorted(out, key=lambda f: f["object"]["name"])

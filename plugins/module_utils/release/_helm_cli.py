# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""helm through the collection's runner, shared by the release modules: the connection flags on every call
(namespace, kubeconfig, context) and the installed release read as JSON (metadata, user values)."""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import GpuOpsError


class Helm:
    """``ctx.params`` must carry ``namespace``, ``kubeconfig``, ``context`` and ``binary_path``."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        p = ctx.params
        self.tool = p["binary_path"] or "helm"
        self.conn = ["--namespace", p["namespace"]]
        if p["kubeconfig"]:
            self.conn += ["--kubeconfig", p["kubeconfig"]]
        if p["context"]:
            self.conn += ["--kube-context", p["context"]]

    def run(self, *args: str, mutating: bool = False, check: bool = True, data: str | None = None) -> Any:
        return self.ctx.runner.run(self.tool, [*args, *self.conn], mutating=mutating, check=check, data=data)

    def metadata(self, name: str) -> dict[str, Any] | None:
        """``helm get metadata`` of the release, None when it is not installed."""
        r = self.run("get", "metadata", name, "-o", "json", check=False)
        if r.rc != 0:
            if "not found" in (r.err + r.out).lower():
                return None
            raise GpuOpsError(
                f"cannot read release {self.ctx.params['namespace']}/{name}: {(r.err or r.out).strip()}",
                cmd=r.argv,
                rc=r.rc,
            )
        meta: dict[str, Any] = json.loads(r.out)
        return meta

    def values(self, name: str) -> dict[str, Any]:
        """The user-supplied values of the deployed revision (``helm get values``)."""
        return json.loads(self.run("get", "values", name, "-o", "json").out or "null") or {}

    def history(self, name: str) -> list[dict[str, Any]]:
        """The release's revisions (``helm history -o json``): revision, status, chart, updated, description."""
        rows = json.loads(self.run("history", name, "-o", "json").out or "[]") or []
        return [r for r in rows if isinstance(r, dict)]

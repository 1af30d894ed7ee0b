# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of gpuops.platform.role_inputs: with ``chart_role``, what every chart role's inputs task gave the
module the same way - its variables (every one with the role's prefix), its argument spec's options, the pinned chart
to look up when the run's plan installs it, and the standard checks of its release name, namespace, chart version,
chart repository URL and kubeconfig - is filled in here from the task's variables, once; then the module runs as usual
(module_utils.inputs holds every rule)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from ansible.plugins.action import ActionBase

MODULE = "gpuops.platform.role_inputs"


def standard_checks(role: str, context: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The checks every chart role runs: (before the role's own, after them)."""
    first: list[dict[str, Any]] = [
        {"var": f"{role}_release_name", "rule": "release_name"},
        {"var": f"{role}_namespace", "rule": "dns1123_label"},
        {"var": f"{role}_chart_version", "rule": "chart_version"},
        {"var": f"{role}_chart_repo_url", "rule": "url", "allow_empty": False},
    ]
    return first, [{"var": f"{role}_kubeconfig", "rule": "kubeconfig", "context": context}]


def chart_lookup(role: str, variables: Mapping[str, Any], resolve: Callable[[str], Any], when: bool) -> dict | None:
    """The pinned chart to look up in its repository (read-only): when the run's plan installs the role
    (``_gpuops_planned_roles``: site.yml, operators.yml) with state present and ``when``; a role run alone meets the
    same check when its release pulls the chart. The mirror (``gpuops_chart_repo_mirror``) stands for the role's URL."""
    planned = resolve("_gpuops_planned_roles") or []
    if not (when and role in planned and variables.get(f"{role}_state") == "present"):
        return None
    return {
        "var": f"{role}_chart_version",
        "name": variables.get(f"{role}_chart_name"),
        "repo_url": resolve("gpuops_chart_repo_mirror") or variables.get(f"{role}_chart_repo_url"),
        "ca_file": resolve("gpuops_chart_repo_ca_file") or "",
    }


def chart_role_args(args: Mapping[str, Any], names: list[str], resolve: Callable[[str], Any], role_path: str) -> dict:
    """The module's arguments for a chart role's inputs task (``chart_role: true``): the given ones, plus what the
    role would otherwise spell out - ``prefix``, ``variables``, ``options``, ``chart``, the standard checks."""
    out = {k: v for k, v in args.items() if k not in ("chart_role", "chart_when")}
    role = out["role"]
    prefix = out.setdefault("prefix", f"{role}_")
    if "variables" not in out:
        out["variables"] = {n: resolve(n) for n in names if n.startswith(prefix)}
    if "options" not in out:
        spec = yaml.safe_load((Path(role_path) / "meta" / "argument_specs.yml").read_text())
        out["options"] = spec["argument_specs"]["main"]["options"]
    if "chart" not in out:
        chart = chart_lookup(role, out["variables"], resolve, bool(args.get("chart_when", True)))
        if chart:
            out["chart"] = chart
    first, last = standard_checks(role, resolve("gpuops_kubeconfig_context") or "")
    out["checks"] = [*first, *(out.get("checks") or []), *last]
    return out


class ActionModule(ActionBase):
    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if args.get("chart_role"):
            templar = self._templar.copy_with_new_env(available_variables=task_vars)

            def resolve(name: str) -> Any:
                return templar.resolve_variable_expression(name) if name in task_vars else None

            args = chart_role_args(args, sorted(task_vars), resolve, str(task_vars.get("role_path") or ""))
        else:
            args.pop("chart_when", None)
        result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        return result

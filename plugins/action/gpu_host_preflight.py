# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of gpuops.platform.gpu_host_preflight: the module as it is, except that O(inventory_hosts) - the
inventory names of hosts whose facts this run already gathered - becomes O(hosts) here on the controller, from each
host's variables: its node name (C(gpuops_node_name), else the inventory name), its C(gpuops_host) facts and, in
check mode, the fixes host_prep planned on it (C(host_prep_planned_fixes)). The roles passed that list before as JSON
built by a Jinja loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

MODULE = "gpuops.platform.gpu_host_preflight"


def hosts_from_inventory(names: list[str], hostvars: Mapping[str, Any], check_mode: bool) -> list[dict[str, Any]]:
    """O(hosts) of the module for the inventory hosts ``names``: their node name, facts and (in check mode) the
    fixes host_prep planned on them. A host without C(gpuops_host) facts is an error naming it (the caller reads
    such hosts where they are instead)."""
    out = []
    for name in names:
        hv = hostvars[name] if name in hostvars else None
        if hv is None:
            raise AnsibleActionFail(f"inventory_hosts: {name!r} is not a host of the inventory")
        facts = (hv.get("ansible_facts") or {}).get("gpuops_host")
        if not isinstance(facts, Mapping):
            raise AnsibleActionFail(
                f"inventory_hosts: {name} has no gpuops_host facts in this run (gather them with "
                "gpuops.platform.gpu_host_facts first, or evaluate the host where it is with node_name)"
            )
        out.append(
            {
                "node_name": hv.get("gpuops_node_name") or name,
                "facts": dict(facts),
                "planned_fixes": list(hv.get("host_prep_planned_fixes") or []) if check_mode else [],
            }
        )
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        names = args.pop("inventory_hosts", None)
        if names is not None:
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise AnsibleActionFail("inventory_hosts: a list of inventory host names is expected")
            if "hosts" in args:
                raise AnsibleActionFail("inventory_hosts and hosts are mutually exclusive")
            # each host's variables are templated as they are read (HostVars), only the three used here
            args["hosts"] = hosts_from_inventory(names, task_vars.get("hostvars", {}), bool(self._task.check_mode))
        result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        return result

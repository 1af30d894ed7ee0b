# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: planned_roles
short_description: The cluster roles a run's tags select, whose plan the run's preflight judges first
version_added: 0.9.0
author: gpuops.platform maintainers
description:
  - From C(ansible_run_tags) and C(ansible_skip_tags), the roles of the cluster plane that the run will apply, by the
    layer tags of C(site.yml) (C(operators), C(sharing), C(network), C(schedulers) or C(batch), C(monitoring),
    C(smoke)) and the roles' own tags (C(kueue), C(kueue_install), ...). C(all) selects every role; a layer or role name
    among the skipped tags removes it.
  - The run's preflight checks the charts and the cluster-reading rules of these roles only, so C(--tags hosts) needs
    neither the chart repository nor the API server.
  - With O(enabled) (the collection-wide C(gpuops_*) switches), only the roles those switches turn on. The run's
    preflight checks the inputs of every enabled role (C(['all'])) and plans the enabled roles its tags select.
positional: skip_tags
options:
  _input:
    description: C(ansible_run_tags).
    type: list
    elements: str
    required: true
  skip_tags:
    description: C(ansible_skip_tags).
    type: list
    elements: str
    default: []
  enabled:
    description:
      - The C(gpuops_*) variables by name (C(gpuops_<role>_managed) switches, C(gpuops_batch_schedulers)); a role
        whose switch is off (or a scheduler not in the list) is left out. Not given - every role.
    type: dict
"""

EXAMPLES = r"""
- name: The roles this run applies
  ansible.builtin.set_fact:
    _roles: "{{ ansible_run_tags | gpuops.platform.planned_roles(ansible_skip_tags) }}"

- name: The roles the inventory turns on (whatever the tags)
  ansible.builtin.set_fact:
    _enabled: >-
      {{ ['all'] | gpuops.platform.planned_roles(enabled={'gpuops_nfd_managed': true,
                                                          'gpuops_batch_schedulers': ['kueue']}) }}
"""

RETURN = r"""
_value:
  description: Role names, in the order of C(site.yml).
  type: list
  elements: str
"""

from collections.abc import Iterable, Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible.module_utils.parsing.convert_bool import boolean  # noqa: E402

# the cluster roles in site.yml's order, and the layer tags of the plays that run them (playbooks/site.yml,
# operators.yml)
ROLES = (
    "nfd",
    "gpu_sharing",
    "gpu_operator",
    "network_operator",
    "sriov_network_operator",
    "amd_gpu_operator",
    "kueue",
    "volcano",
    "kai_scheduler",
    "monitoring",
    "smoke_tests",
)
LAYERS = {
    "operators": ("nfd", "gpu_sharing", "gpu_operator", "amd_gpu_operator"),
    "sharing": ("gpu_sharing", "gpu_operator"),
    "network": ("network_operator", "sriov_network_operator"),
    "schedulers": ("kueue", "volcano", "kai_scheduler"),
    "batch": ("kueue", "volcano", "kai_scheduler"),
    "monitoring": ("monitoring",),
    "smoke": ("smoke_tests",),
}


def _selected(tags: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for tag in tags:
        if tag == "all":
            out.update(ROLES)
        out.update(LAYERS.get(tag, ()))
        out.update(r for r in ROLES if tag == r or tag.startswith(r + "_"))
    return out


BATCH = ("kueue", "volcano", "kai_scheduler")


def _switch(value: Any) -> bool:
    """A gpuops_*_managed switch as Ansible's bool filter reads it."""
    return boolean(value, strict=False)


def enabled_roles(switches: Mapping[str, Any]) -> set[str]:
    """The roles the collection-wide switches turn on: gpuops_<role>_managed for each role (its default as the gpuops
    role sets it where the mapping lacks it: NFD and the GPU Operator on, the rest off), the schedulers listed in
    gpuops_batch_schedulers."""
    defaults = {"nfd": True, "gpu_operator": True}
    out = {r for r in ROLES if r not in BATCH and _switch(switches.get(f"gpuops_{r}_managed", defaults.get(r, False)))}
    batch = switches.get("gpuops_batch_schedulers") or []
    if isinstance(batch, str) or not isinstance(batch, Sequence):
        raise AnsibleFilterError(f"planned_roles: gpuops_batch_schedulers must be a list, got {type(batch).__name__}")
    return out | {r for r in BATCH if r in batch}


def planned_roles(
    run_tags: Sequence[str], skip_tags: Sequence[str] | None = None, enabled: Mapping[str, Any] | None = None
) -> list[str]:
    # lists of the play's tags (Ansible may hand lazy sequences), never a bare string
    if isinstance(run_tags, str) or not isinstance(run_tags, Sequence) or not all(isinstance(t, str) for t in run_tags):
        raise AnsibleFilterError("planned_roles expects ansible_run_tags, a list of tags")
    skipped: set[str] = set()
    for tag in skip_tags or []:
        skipped.update(LAYERS.get(tag, ()))
        skipped.update(r for r in ROLES if tag == r)
    chosen = _selected(run_tags) - skipped
    if enabled is not None:
        chosen &= enabled_roles(enabled)
    return [r for r in ROLES if r in chosen]


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"planned_roles": planned_roles}

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
"""

EXAMPLES = r"""
- name: The roles this run applies
  ansible.builtin.set_fact:
    _roles: "{{ ansible_run_tags | gpuops.platform.planned_roles(ansible_skip_tags) }}"
"""

RETURN = r"""
_value:
  description: Role names, in the order of C(site.yml).
  type: list
  elements: str
"""

from collections.abc import Iterable, Sequence  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402

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


def planned_roles(run_tags: Sequence[str], skip_tags: Sequence[str] | None = None) -> list[str]:
    # lists of the play's tags (Ansible may hand lazy sequences), never a bare string
    if isinstance(run_tags, str) or not isinstance(run_tags, Sequence) or not all(isinstance(t, str) for t in run_tags):
        raise AnsibleFilterError("planned_roles expects ansible_run_tags, a list of tags")
    skipped: set[str] = set()
    for tag in skip_tags or []:
        skipped.update(LAYERS.get(tag, ()))
        skipped.update(r for r in ROLES if tag == r)
    chosen = _selected(run_tags) - skipped
    return [r for r in ROLES if r in chosen]


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"planned_roles": planned_roles}

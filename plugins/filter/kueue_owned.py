# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: kueue_owned
short_description: The kueue role's objects to delete, or the values that did not land
version_added: 0.3.0
author: gpuops.platform maintainers
description:
  - With O(check=prune) (the rule C(_kueue.prune_objects) of the collection's private module_utils), the live
    LocalQueues, ClusterQueues and ResourceFlavors labelled as the role's
    (C(app.kubernetes.io/managed-by=gpuops.platform),
    C(gpuops.platform/role=kueue)) that the wanted objects no longer hold, in delete order (LocalQueues, then
    ClusterQueues, then ResourceFlavors); objects without the labels are never returned.
  - With O(check=admitted) (C(_kueue.admitted_findings)), the input is the ClusterQueues to remove and O(live) the
    cluster's Workloads - a C(kueue-workloads-admitted) finding (error; warning with O(force)) naming the admitted,
    unfinished workloads they hold.
  - With O(check=landed) (C(_kueue.landing_findings)), a C(kueue-object-not-landed) finding per wanted object that is
    missing or whose spec or labels differ from the live object's, naming the field, the wanted and the live value.
positional: live, check, force
options:
  _input:
    description: The objects the role applies now.
    type: list
    elements: dict
    required: true
  live:
    description: The live objects (the C(resources) of C(kubernetes.core.k8s_info) reads).
    type: list
    elements: dict
    required: true
  check:
    description: What to compute.
    type: str
    choices: [prune, landed, admitted]
    default: prune
  force:
    description: With O(check=admitted), report admitted workloads as a warning instead of an error.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Delete what the role created and the variables dropped
  kubernetes.core.k8s:
    definition: "{{ wanted | gpuops.platform.kueue_owned(live) }}"
    state: absent
"""

RETURN = r"""
_value:
  description: The objects to delete, in delete order (prune), or the findings (landed, admitted).
  type: list
  elements: dict
"""

from collections.abc import Callable, Mapping  # noqa: E402 - after the documentation, as ansible-test expects
from typing import Any  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.batch import _kueue  # noqa: E402


def kueue_owned(wanted: Any, live: Any, check: str = "prune", force: bool = False) -> list[dict[str, Any]]:
    for name, value in (("input", wanted), ("live", live)):
        if not isinstance(value, list) or not all(isinstance(o, Mapping) for o in value):
            raise AnsibleFilterError(f"kueue_owned expects {name} as a list of objects")
    if check == "prune":
        return _kueue.prune_objects(wanted, live)
    if check == "landed":
        return _kueue.landing_findings(wanted, live)
    if check == "admitted":
        return _kueue.admitted_findings(wanted, live, bool(force))
    raise AnsibleFilterError(f"kueue_owned: check must be prune, landed or admitted, not {check!r}")


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"kueue_owned": kueue_owned}

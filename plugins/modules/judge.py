#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: judge
short_description: Turn a role's findings into its verdict - fail naming each one, or list them
version_added: 0.5.0
description:
  - The findings a rule of the collection returned (C({id, severity, object, evidence, cause, fix})) become the task's
    verdict - it fails when one is at or above O(fail_on), with one line per failing finding (the finding, the object,
    the evidence, why, the fix) and O(stop); otherwise it succeeds and shows the others.
  - One message format for every role, written once in Python (the collection's private module_utils
    C(common._judge)), where the roles had an assert with a Jinja loop each.
  - Runs on the controller only (an action plugin); nothing runs on the target host; changes nothing.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.info_module
options:
  role:
    description: The role (or step) the findings belong to; the failure message starts with it.
    type: str
    required: true
  findings:
    description: The findings, as the collection's rules return them.
    type: list
    elements: dict
    required: true
  fail_on:
    description: The lowest severity that fails the task.
    type: str
    choices: [error, warning]
    default: error
  stop:
    description: What the failure message ends with - what the run did not do because of it.
    type: str
    default: Nothing was changed.
  none:
    description: The message when there is no finding.
    type: str
    default: no finding
  quiet:
    description: Do not show the findings that did not fail (they are still returned).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Judge the policies against the hosts
  gpuops.platform.judge:
    role: sriov_network_operator
    findings: "{{ _findings }}"
"""

RETURN = r"""
failed:
  description: Whether a finding is at or above O(fail_on).
  returned: always
  type: bool
msg:
  description:
    - Failed - the role, each failing finding's line (C([id] Kind name - evidence. Why - cause. Fix - fix)) joined by
      C( || ), then O(stop). Otherwise the other findings' lines with their severity, or O(none).
  returned: always
  type: str
lines:
  description: Every finding's line, its severity first.
  returned: always
  type: list
  elements: str
counts:
  description: The number of findings per severity (C(error), C(warning), C(info)).
  returned: always
  type: dict
  sample: {error: 0, warning: 1, info: 0}
"""

#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: report
short_description: Print a text report verbatim (aligned tables, not a wrapped YAML list)
version_added: 0.1.0
description:
  - Prints O(text) on the controller's output as it is, line for line, under the task's header - so a table keeps
    its columns, where M(ansible.builtin.debug) prints a YAML list of strings that the callback wraps and quotes.
  - Runs on the controller only (an action plugin); nothing runs on the target host.
  - Used by C(playbooks/diagnose.yml) for the readiness table and the findings.
author: gpuops.platform contributors (@gpuops)
extends_documentation_fragment:
  - gpuops.platform._attributes.info_module
options:
  text:
    description:
      - The report. Trailing whitespace of each line is dropped; an empty text prints nothing.
      - One of O(text) and O(remediation) is required.
    type: str
  remediation:
    description:
      - The end of C(playbooks/remediate.yml), rendered in Python in place of O(text) - the mode, one line per step
        that ran (each step's own C(msg)), the drain plan as a table, and the repair ladder's step.
    type: dict
    suboptions:
      mode:
        description: The remediation mode.
        type: str
        required: true
        choices: [dry_run, act]
      node:
        description: The node the event is about.
        type: str
        required: true
      steps:
        description:
          - The results of the steps in their order (quarantine, drain, GPU reset, break-fix, return); a step that did
            not run - an empty result or one without C(msg) - is left out.
        type: list
        elements: raw
        default: []
      drain_plan:
        description: The drain's plan, one row per pod (C(pod), C(decision), C(why)).
        type: list
        elements: dict
        default: []
      repair:
        description: The repair ladder's step (C(step), C(why), C(skipped) - pairs of a step passed over and why).
        type: dict
  title:
    description: A line printed above the report.
    type: str
notes:
  - The text is also returned (RV(lines)), so a later task or a callback that records results (AWX job events, the
    JSON callback) has it too.
"""

EXAMPLES = r"""
- name: Print the readiness table
  gpuops.platform.report:
    title: GPU nodes
    text: "{{ lookup('ansible.builtin.template', 'templates/diagnosis.txt.j2') }}"
"""

RETURN = r"""
lines:
  description: The lines printed (title first when given).
  returned: always
  type: list
  elements: str
  sample: ["NODE   READY", "gpu-0  True"]
"""

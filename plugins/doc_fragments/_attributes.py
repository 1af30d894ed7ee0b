# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This doc fragment is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

from __future__ import annotations


class ModuleDocFragment:
    # Descriptions of the attributes; every module states its support level in its own documentation.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description:
      - Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled/queried by the module has not changed in a relevant way.
"""

    # For modules that only read state; used alone (it carries the descriptions too, as FULL_SUPPORT does).
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    description:
      - Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
    support: N/A
    details:
      - This action does not modify state.
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled/queried by the module has not changed in a relevant way.
    support: full
    details:
      - This action does not modify state.
"""

    # For modules that return facts (with INFO_MODULE: a facts module only reads state).
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""

    # For modules that change state with full check mode, diff mode and idempotence support; used alone
    # (it carries the descriptions too). The module adds the details: what check mode computes, what the
    # diff shows.
    FULL_SUPPORT = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    support: full
    description:
      - Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
  idempotent:
    support: full
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled/queried by the module has not changed in a relevant way.
      - A run that failed after changing something reports C(changed=true); the next run finishes the job.
"""

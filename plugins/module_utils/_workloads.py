# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The former path of ``status/_workloads.py``: the names _sharing_status import from here, and nothing else.

Remove this file once they import ``module_utils.status._workloads``.
"""

from __future__ import annotations

from ansible_collections.gpuops.platform.plugins.module_utils.status._workloads import gpu_resources

__all__ = ["gpu_resources"]

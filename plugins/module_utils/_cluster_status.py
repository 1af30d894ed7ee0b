# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""The former path of ``status/_cluster_status.py``: the names _sharing_status import from here, and nothing else.

Remove this file once they import ``module_utils.status._cluster_status``.
"""

from __future__ import annotations

from ansible_collections.gpuops.platform.plugins.module_utils.status._cluster_views import (
    gpu_resources,
    match_host_facts,
)

__all__ = ["gpu_resources", "match_host_facts"]

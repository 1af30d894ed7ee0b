# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils package is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Remediation of GPU faults on nodes (the action half of the event plane): the event and its validation
(``_event``), the decisions as pure functions - the node's quarantine marks, the circuit breaker, the drain and the
repair ladder (``_policy``) - and the Kubernetes calls that carry them out (``_api``, ``_quarantine``, ``_drain``)."""

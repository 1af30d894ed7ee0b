# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""systemd units through systemctl (queries are read-only; changes are skipped in check mode)."""

from __future__ import annotations


class Systemd:
    def __init__(self, runner):
        self._runner = runner

    def available(self):
        return bool(self._runner.which("systemctl"))

    def _query(self, verb, unit):
        res = self._runner.run("systemctl", [verb, unit], check=False)
        return (res.out.strip().splitlines() or [""])[0].strip()

    def is_active(self, unit):
        return self._query("is-active", unit) == "active"

    def is_enabled(self, unit):
        # enabled, enabled-runtime, alias, static count as "will start"; disabled/masked/not-found do not.
        return self._query("is-enabled", unit) in ("enabled", "enabled-runtime", "alias", "static", "generated")

    def status(self, unit):
        """{active, enabled} or None values when systemctl is absent."""
        if not self.available():
            return {"active": None, "enabled": None}
        return {"active": self.is_active(unit), "enabled": self.is_enabled(unit)}

    def daemon_reload(self):
        return self._runner.run("systemctl", ["daemon-reload"], mutating=True)

    def enable(self, unit):
        return self._runner.run("systemctl", ["enable", unit], mutating=True)

    def start(self, unit):
        return self._runner.run("systemctl", ["start", unit], mutating=True)

    def restart(self, unit):
        return self._runner.run("systemctl", ["restart", unit], mutating=True)

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""systemd units through systemctl (queries are read-only; changes are skipped in check mode).

A query that systemctl cannot answer (no systemd running as PID 1, no D-Bus, a timeout) gives the state
None, "unknown", never "inactive" or "disabled": a caller must not act, or report, on a state it could not
read."""

from __future__ import annotations

from typing import Any

# systemctl is-active / is-enabled print one of these words when they could read the state.
ACTIVE_STATES = frozenset(
    ("active", "reloading", "inactive", "failed", "activating", "deactivating", "maintenance", "refreshing")
)
ENABLED_STATES = frozenset(
    (
        "enabled",
        "enabled-runtime",
        "linked",
        "linked-runtime",
        "alias",
        "masked",
        "masked-runtime",
        "static",
        "indirect",
        "disabled",
        "generated",
        "transient",
        "bad",
        "not-found",
    )
)
# enabled, enabled-runtime, alias, static, generated count as "will start"; the rest do not.
WILL_START = frozenset(("enabled", "enabled-runtime", "alias", "static", "generated"))
# systemd creates this directory early at boot when it runs as PID 1: sd_booted(3) tests it, and so does systemctl
# itself before it talks to the manager (a container or chroot with systemctl installed but no systemd has none).
BOOTED_MARKER = "/run/systemd/system"


def booted(fs: Any) -> bool:
    """Whether the host runs systemd as its init (sd_booted(3)): ``systemctl daemon-reload``, ``enable`` and ``start``
    can only work then, while ``systemctl is-enabled`` still answers from the unit files without it."""
    return bool(fs.isdir(BOOTED_MARKER))


class Systemd:
    def __init__(self, runner: Any) -> None:
        self._runner = runner
        self.last_error: dict[str, str] = {}  # unit -> what systemctl said when it could not answer

    def available(self) -> bool:
        return bool(self._runner.which("systemctl"))

    def _query(self, verb: str, unit: str, known: frozenset[str]) -> str | None:
        res = self._runner.run("systemctl", [verb, unit], check=False)
        word = (res.out.strip().splitlines() or [""])[0].strip()
        if word in known:
            return word
        err = (res.err or res.out).strip()
        if verb == "is-enabled" and not word and "No such file or directory" in err:
            return "not-found"  # systemd < 250 says so on stderr; later versions print not-found
        self.last_error[unit] = f"systemctl {verb} {unit} (rc={res.rc}): {err or 'no output'}"
        return None

    def active_state(self, unit: str) -> str | None:
        """``systemctl is-active`` state, None when systemctl could not tell."""
        return self._query("is-active", unit, ACTIVE_STATES)

    def enabled_state(self, unit: str) -> str | None:
        """``systemctl is-enabled`` state, None when systemctl could not tell."""
        return self._query("is-enabled", unit, ENABLED_STATES)

    def is_active(self, unit: str) -> bool | None:
        state = self.active_state(unit)
        return None if state is None else state == "active"

    def is_enabled(self, unit: str) -> bool | None:
        state = self.enabled_state(unit)
        return None if state is None else state in WILL_START

    def status(self, unit: str) -> dict[str, bool | None]:
        """{active, enabled}; None values when systemctl is absent or cannot answer."""
        if not self.available():
            return {"active": None, "enabled": None}
        return {"active": self.is_active(unit), "enabled": self.is_enabled(unit)}

    def daemon_reload(self) -> Any:
        return self._runner.run("systemctl", ["daemon-reload"], mutating=True)

    def enable(self, unit: str) -> Any:
        return self._runner.run("systemctl", ["enable", unit], mutating=True)

    def start(self, unit: str) -> Any:
        return self._runner.run("systemctl", ["start", unit], mutating=True)

    def restart(self, unit: str) -> Any:
        return self._runner.run("systemctl", ["restart", unit], mutating=True)

# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Package queries and installs: dpkg-query/apt-get on Debian/Ubuntu, rpm/dnf on RPM hosts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuops.platform.plugins.module_utils.common._errors import InvalidInput, Unsupported

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}

# What a package name and a package revision may be, per package manager. A value that is not one never reaches
# apt-get, dnf, dpkg-query or rpm: a leading '-' would be read as an option (apt-get -oAPT::Get::Simulate=true
# "installs" nothing and succeeds), '=' '/' ':' '*' '?' '[' as version, release, architecture or glob syntax.
# - Debian Policy 5.6.1 (Package): at least two characters, lower-case letters, digits, '+', '-', '.', starting
#   with a letter or digit. 5.6.12 (Version): the debian_revision holds only letters, digits, '+', '.', '~' (no
#   '-': the last '-' of a version separates it).
# - RPM (Fedora Packaging Guidelines, "Naming"; rpm's Name and Release tags): a name of letters, digits, '-', '.',
#   '_', '+', not starting with '-'; a release of letters, digits, '.', '_', '+', '~', '^' (no '-').
# Each must also start with a letter or digit here, and be at most 255 characters.
NAME_RE = {"apt": re.compile(r"[a-z0-9][a-z0-9+.-]+\Z"), "dnf": re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*\Z")}
REVISION_RE = {"apt": re.compile(r"[A-Za-z0-9][A-Za-z0-9+.~]*\Z"), "dnf": re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~^]*\Z")}
_NAME_RULE = {
    "apt": "a Debian package name: at least 2 characters of a-z 0-9 + - ., starting with a letter or digit "
    "(Debian Policy 5.6.1)",
    "dnf": "an RPM package name: A-Z a-z 0-9 - . _ +, starting with a letter or digit",
}
_REVISION_RULE = {
    "apt": "a Debian revision: A-Z a-z 0-9 + . ~, starting with a letter or digit, no '-' (Debian Policy 5.6.12)",
    "dnf": "an RPM release: A-Z a-z 0-9 . _ + ~ ^, starting with a letter or digit, no '-'",
}


def _check(
    option: str, value: Any, patterns: Mapping[str, Any], rules: Mapping[str, str], what: str, mgr: str | None
) -> Any:
    managers = [mgr] if mgr else list(patterns)
    if isinstance(value, str) and len(value) <= 255 and any(patterns[m].match(value) for m in managers):
        return value
    rule = " or ".join(rules[m] for m in managers)
    raise InvalidInput(
        f'{option}: "{value}" is not {what}: it must be {rule}; no package command was run (a value starting with "-" '
        "would reach the package manager as an option)"
    )


def check_name(option: str, value: Any, mgr: str | None = None) -> Any:
    """``value`` when it is a package name ``mgr`` ('apt' or 'dnf'; either when None) accepts, else InvalidInput
    naming ``option``."""
    return _check(option, value, NAME_RE, _NAME_RULE, "a valid package name", mgr)


def check_revision(option: str, value: Any, mgr: str | None = None) -> Any:
    """``value`` when it is a package revision (Debian) or release (RPM) ``mgr`` accepts, else InvalidInput naming
    ``option``."""
    return _check(option, value, REVISION_RE, _REVISION_RULE, "a valid package revision", mgr)


def manager(runner: Any) -> str:
    """'apt' or 'dnf' by the tools present; Unsupported when neither."""
    if runner.which("dpkg-query") and runner.which("apt-get"):
        return "apt"
    if runner.which("rpm") and runner.which("dnf"):
        return "dnf"
    raise Unsupported("no supported package manager: need dpkg-query and apt-get (Debian/Ubuntu) or rpm and dnf (RHEL)")


def installed(runner: Any, pattern: str) -> dict[str, str]:
    """Installed packages matching ``pattern`` (dpkg-query glob or exact RPM name): {name: version}."""
    found = {}
    if runner.which("dpkg-query"):
        res = runner.run(
            "dpkg-query", ["-W", "-f", "${Package}\t${Version}\t${db:Status-Status}\n", pattern], check=False
        )
        for line in res.out.splitlines():
            fields = line.split("\t")
            if len(fields) == 3 and fields[2] == "installed" and fields[1]:
                found[fields[0]] = fields[1]
    elif runner.which("rpm"):
        res = runner.run("rpm", ["-q", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n", pattern], check=False)
        for line in res.out.splitlines():
            fields = line.split("\t")
            if len(fields) == 2:
                found[fields[0]] = fields[1]
    return found


def upstream_version(version: str | None) -> str | None:
    """``570.124.06-1`` → ``570.124.06`` (epoch and package revision removed)."""
    if not version:
        return None
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def install(runner: Any, mgr: str, name: str, version: str) -> Any:
    """Install exactly ``name`` at ``version`` (mutating: skipped in check mode)."""
    if mgr == "apt":
        args = ["install", "-y", "-q", "--no-install-recommends", "--allow-downgrades", f"{name}={version}"]
        return runner.run("apt-get", args, mutating=True, env=APT_ENV)
    return runner.run("dnf", ["install", "-y", "--allowerasing", f"{name}-{version}"], mutating=True)

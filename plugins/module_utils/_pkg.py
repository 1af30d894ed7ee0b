# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the collection: it may change at any time.
# Do not use it from other collections or standalone plugins/modules.

"""Package queries and installs: dpkg-query/apt-get on Debian/Ubuntu, rpm/dnf on RPM hosts."""

from __future__ import annotations

from ansible_collections.gpuops.platform.plugins.module_utils._errors import Unsupported

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}


def manager(runner):
    """'apt' or 'dnf' by the tools present; Unsupported when neither."""
    if runner.which("dpkg-query") and runner.which("apt-get"):
        return "apt"
    if runner.which("rpm") and runner.which("dnf"):
        return "dnf"
    raise Unsupported("no supported package manager: need dpkg-query and apt-get (Debian/Ubuntu) or rpm and dnf (RHEL)")


def installed(runner, pattern):
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


def upstream_version(version):
    """``570.124.06-1`` → ``570.124.06`` (epoch and package revision removed)."""
    if not version:
        return None
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def install(runner, mgr, name, version):
    """Install exactly ``name`` at ``version`` (mutating: skipped in check mode)."""
    if mgr == "apt":
        args = ["install", "-y", "-q", "--no-install-recommends", "--allow-downgrades", f"{name}={version}"]
        return runner.run("apt-get", args, mutating=True, env=APT_ENV)
    return runner.run("dnf", ["install", "-y", "--allowerasing", f"{name}-{version}"], mutating=True)

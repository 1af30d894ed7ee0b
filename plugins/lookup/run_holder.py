# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: run_holder
short_description: The identity of this ansible-playbook run, as it holds a release's Lease
version_added: 0.2.0
author:
  - gpuops.platform contributors (@gpuops)
description:
  - Returns C(gpuops.platform <user>@<host> pid <pid> started <UTC time>) for the controller process running the
    playbook (the parent of the worker that evaluates the lookup) and the time it started (read from C(/proc) on
    Linux; elsewhere the time of the lookup).
  - The internal C(helm_release) role writes it into each release's C(coordination.k8s.io) Lease, so a Lease names
    the process that holds it, and M(gpuops.platform.helm_release_apply), when it runs on the controller, can tell
    that this process has ended (killed) and stop its orphaned helm command.
  - The same value for every call in one run (on Linux).
options: {}
"""

EXAMPLES = r"""
- name: Name this run
  ansible.builtin.set_fact:
    run_holder: "{{ lookup('gpuops.platform.run_holder') }}"
"""

RETURN = r"""
_raw:
  description: One string, for example C(gpuops.platform alice@bastion pid 4242 started 2026-11-27T10:00:00Z).
  type: list
  elements: str
"""

import getpass  # noqa: E402 - after the documentation, as ansible-test expects
import os  # noqa: E402
import socket  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from typing import Any  # noqa: E402

from ansible.plugins.lookup import LookupBase  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.release._helm_release import run_holder  # noqa: E402


def process_started(pid: int, proc: str = "/proc") -> datetime | None:
    """The start time of a process from /proc/<pid>/stat (clock ticks after boot) and /proc/stat (boot time)."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8") as f:
            ticks = int(f.read().rsplit(")", 1)[-1].split()[19])
        with open(os.path.join(proc, "stat"), encoding="utf-8") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return datetime.fromtimestamp(boot + ticks / hz, timezone.utc)  # noqa: UP017 - controllers run on Python < 3.11


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        pid = os.getppid()  # this runs in a worker forked from the ansible-playbook process
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = str(os.getuid())
        started = process_started(pid) or datetime.now(timezone.utc)  # noqa: UP017
        return [run_holder(user, socket.gethostname(), pid, started)]

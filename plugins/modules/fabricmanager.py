#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: fabricmanager
short_description: NVIDIA Fabric Manager at the driver's exact version on NVSwitch hosts
version_added: 0.1.0
author: gpuops.platform contributors (@gpuops)
description:
  - On hosts with NVSwitches (PCI vendor 0x10de, class 0x0680), ensures the nvidia-fabricmanager package whose version
    equals the NVIDIA driver's version, and the C(nvidia-fabricmanager) service enabled and running. A mismatched
    Fabric Manager is never installed or kept (NVIDIA requires the same version as the driver).
  - The driver version is the loaded module's (C(/proc/driver/nvidia/version)), else the installed module's
    (C(modinfo -F version nvidia)). When both exist and differ, the task fails and asks for a reboot. When neither
    exists, the task fails.
  - Package names are those of NVIDIA's CUDA repositories. Debian/Ubuntu C(nvidia-fabricmanager-<branch>) (for example
    C(nvidia-fabricmanager-570)) up to branch 580 and C(nvidia-fabricmanager) from branch 590 on (NVIDIA removed the
    branch from Ubuntu package names with 590), installed as C(apt-get install <name>=<driver version>-1). RHEL and
    compatible C(nvidia-fabric-manager), installed as C(dnf install nvidia-fabric-manager-<driver version>-1).
    O(package_name) and O(package_revision) override these for other repositories.
  - An installed package counts as matching when its upstream version (without epoch and revision) equals the driver
    version, so distribution builds such as C(570.124.06-0ubuntu0.22.04.1) are kept.
  - On hosts without NVSwitches, nothing is changed and RV(msg) says why.
  - An upgrade under a running service records the restart as pending (under
    C(/var/lib/gpuops-platform/pending/)) before the package changes; the record is removed once the service was
    restarted, so a run that failed in between restarts the service on the next run. A service state that
    C(systemctl) cannot report (no running systemd) is an error, never taken for inactive or disabled.
extends_documentation_fragment:
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Queries the package and service state and reports the install and service actions without running them.
  diff_mode:
    details:
      - Shows package version and service state before and after.
options:
  package_name:
    description:
      - Package to install instead of the name derived from the package manager and driver branch.
      - Must be a Debian package name (apt hosts) or an RPM package name (dnf hosts), starting with a letter or digit;
        anything else (a value starting with C(-), C(=), C(/), spaces, globs) is refused, naming this option, before
        any command runs.
    type: str
  package_revision:
    description:
      - Package revision appended to the driver version to form the package version.
      - Must be a Debian revision (apt hosts; letters, digits, C(+ . ~)) or an RPM release (dnf hosts; letters,
        digits, C(. _ + ~ ^)), starting with a letter or digit and without C(-); anything else is refused, naming
        this option, before any command runs.
    type: str
    default: "1"
notes:
  - The NVIDIA GPU Operator's driver container runs its own Fabric Manager; use this module only with a host driver.
"""

EXAMPLES = r"""
- name: Fabric Manager matching the installed driver
  gpuops.platform.fabricmanager:
  become: true
"""

RETURN = r"""
msg:
  description: Why nothing was done, on hosts without NVSwitches.
  returned: when the host has no NVSwitch
  type: str
  sample: "no NVSwitch on this host (no PCI device with vendor 0x10de, class 0x0680): fabricmanager not needed"
nvswitches:
  description: PCI addresses of the NVSwitches.
  returned: always
  type: list
  elements: str
  sample: ["0000:05:00.0", "0000:06:00.0"]
driver_version:
  description: The NVIDIA driver version Fabric Manager matches.
  returned: when the host has NVSwitches
  type: str
  sample: 570.124.06
package:
  description: The package name.
  returned: when the host has NVSwitches
  type: str
  sample: nvidia-fabricmanager-570
version_before:
  description: Installed package version before the task, null when not installed.
  returned: when the host has NVSwitches
  type: str
  sample: 570.86.15-1
version:
  description: Package version after the task.
  returned: when the host has NVSwitches
  type: str
  sample: 570.124.06-1
service:
  description: The service after the task, C(name), C(enabled), C(active).
  returned: when the host has NVSwitches
  type: dict
  sample: {"name": "nvidia-fabricmanager.service", "enabled": true, "active": true}
actions:
  description: What was done (or, in check mode, would be done).
  returned: when the host has NVSwitches
  type: list
  elements: str
  sample:
    - install nvidia-fabricmanager-570 570.124.06-1
    - enable nvidia-fabricmanager.service
    - start nvidia-fabricmanager.service
"""

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.host import _fabricmanager  # noqa: E402

ARGUMENT_SPEC = {
    "package_name": {"type": "str"},
    "package_revision": {"type": "str", "default": "1"},
}


def main() -> None:
    run_module(_fabricmanager.run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()

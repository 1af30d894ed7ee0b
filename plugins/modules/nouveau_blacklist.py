#!/usr/bin/python
# Copyright (c) 2026, gpuops.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nouveau_blacklist
short_description: Keep the nouveau driver off NVIDIA GPUs
version_added: 0.1.0
author: gpuops.platform contributors (@gpuops)
description:
  - Manages C(/etc/modprobe.d/blacklist-nouveau.conf) (the file name NVIDIA's installation guides use) with
    C(blacklist nouveau) and C(options nouveau modeset=0).
  - When the file changes, regenerates the initramfs for all installed kernels with the host's tool,
    C(update-initramfs -u -k all) (initramfs-tools) or else C(dracut --force --regenerate-all), so that the early
    boot environment does not load nouveau either. The initramfs is not touched when the file is already right.
  - The regeneration is recorded as pending (under C(/var/lib/gpuops-platform/pending/)) before the file changes and
    the record is removed once the regeneration succeeded, so a run that failed or was interrupted in between
    regenerates the initramfs on the next run, although the file is then already right.
  - With O(state=present), unloads nouveau (C(modprobe -r nouveau)) when it is loaded and not in use. A loaded
    nouveau with a non-zero reference count or holders (for example the console framebuffer) is never unloaded;
    the result then says RV(reboot_required=true).
extends_documentation_fragment:
  - gpuops.platform._attributes.full_support
attributes:
  check_mode:
    details:
      - Computes the file change, the initramfs regeneration and the unload, and does none of them.
  diff_mode:
    details:
      - Shows the file before and after and whether nouveau stays loaded.
options:
  state:
    description:
      - V(present) writes the blacklist file and unloads an unused nouveau.
      - V(absent) removes the file (nouveau loads again from the next boot, so RV(reboot_required) is V(true) when
        the file was removed); it never loads nouveau.
    type: str
    choices: [present, absent]
    default: present
notes:
  - Any other modprobe.d file that blacklists nouveau is left alone; gpuops.platform.gpu_host_facts lists them in
    C(nouveau.blacklist_sources).
"""

EXAMPLES = r"""
- name: Blacklist nouveau before installing the NVIDIA driver
  gpuops.platform.nouveau_blacklist:
    state: present
  become: true
  register: nouveau

- name: Reboot when nouveau was in use
  ansible.builtin.reboot:
  become: true
  when: nouveau.reboot_required
"""

RETURN = r"""
reboot_required:
  description: Whether a reboot is needed for the requested state to hold (nouveau in use, or blacklist removed).
  returned: always
  type: bool
  sample: false
path:
  description: The managed file.
  returned: always
  type: str
  sample: /etc/modprobe.d/blacklist-nouveau.conf
actions:
  description: What was done (or, in check mode, would be done), in order.
  returned: always
  type: list
  elements: str
  sample: ["write /etc/modprobe.d/blacklist-nouveau.conf", "update-initramfs -u -k all", "modprobe -r nouveau"]
nouveau:
  description: The nouveau module before the task - C(loaded), C(refcount), C(holders), C(in_use).
  returned: always
  type: dict
  sample: {"loaded": true, "refcount": 0, "holders": [], "in_use": false}
"""

from ansible_collections.gpuops.platform.plugins.module_utils.common._module import run_module  # noqa: E402
from ansible_collections.gpuops.platform.plugins.module_utils.host import _nouveau  # noqa: E402

ARGUMENT_SPEC = {"state": {"type": "str", "choices": ["present", "absent"], "default": "present"}}


def main() -> None:
    run_module(_nouveau.run, argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


if __name__ == "__main__":
    main()

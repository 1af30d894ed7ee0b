"""The simulated host's boot configuration: the kernel command line's parts, the grub.cfg update-grub writes and
the EFI Secure Boot variable's name. A leaf module: the tree writes them at build time, the shims (update-grub,
mokutil) at run time, and neither has to import the other."""

from __future__ import annotations

SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


def split_cmdline(cmdline: str) -> tuple[str, str, str]:
    """(root args, GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT) of a kernel command line."""
    root, linux, default = [], [], []
    for w in cmdline.split():
        if w.startswith("BOOT_IMAGE="):
            continue
        if w.startswith("root=") or w in ("ro", "rw"):
            root.append(w)
        elif w in ("quiet", "splash"):
            default.append(w)
        else:
            linux.append(w)
    return " ".join(root), " ".join(linux), " ".join(default)


def grub_cfg(release: str, root_args: str, args: str) -> str:
    return (
        "# simulated grub.cfg (written by update-grub)\n"
        "menuentry 'Linux' {\n"
        f"\tlinux /boot/vmlinuz-{release} {root_args} {args}\n".replace("  ", " ")
        + f"\tinitrd /boot/initrd.img-{release}\n}}\n"
    )

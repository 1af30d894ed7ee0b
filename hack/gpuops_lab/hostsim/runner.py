"""Run a command with a simulated host's tree presented at the real paths, in private mount, PID and UTS
namespaces (root only; nothing on the machine changes, every mount vanishes with the namespace).

    python -m gpuops_lab.hostsim run --tree TREE -- CMD [ARGS...]

Inside the namespace:

- /etc, /usr, /run, /var, /opt, /boot are overlays: the machine's directory below, the tree's directory
  (<tree>/etc, ...) on top and taking every write. So the tree's /etc/os-release, /etc/modprobe.d,
  /usr/lib/modules/<release> (also /lib/modules: /lib -> usr/lib), the shims at /usr/sbin/modprobe,
  /usr/bin/systemctl, ..., /var/lib/dpkg/status and /run/gpuops-sim are seen, and what a command writes
  there lands in the tree. (Needs a merged-/usr machine, where /lib, /bin, /sbin link into /usr.)
- /sys is the tree's sys (bind mount).
- /proc is a read-only tmpfs holding the tree's proc entries (cmdline, modules, driver/ - bind mounts,
  writable) and, for everything else (self, cpuinfo, meminfo, mounts, sys, numeric PIDs present at
  start, ...), symlinks into a read-only procfs of the new PID namespace mounted at /proc/.real (so
  /proc/sys and /proc/sysrq-trigger cannot change the machine).
- The kernel's identity is the simulated one: the hostname is the host's name (UTS namespace),
  /proc/sys/kernel/{osrelease,version} and /proc/version carry the profile's kernel_release, the `uname`
  shim prints it, and PYTHONPATH starts with pyshim/ whose sitecustomize makes os.uname() (hence
  platform.release(), Ansible's ansible_kernel) report it. /proc/cpuinfo and /proc/meminfo stay the
  machine's.
- PID 1 is this runner (named "systemd" so that service-manager detection sees systemd); it runs the
  command as its child, reaps orphans, and is the simulated kernel's event loop: it polls the sysfs files
  the kernel reacts to (sriov_numvfs, drivers/*/bind|unbind, drivers_probe) every 20 ms and runs
  kernel.apply() when one changes. It exits with the command's status (128+N for signal N).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import time
import traceback
from pathlib import Path

OVERLAY_DIRS = ("etc", "usr", "run", "var", "opt", "boot")
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
PR_SET_NAME = 15
POLL_S = 0.02
# appended to the command's PATH inside the namespace (init)
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

_libc = None


def _load_libc() -> ctypes.CDLL:
    """libc, loaded before unshare(): ctypes.util.find_library would fork helper processes, and the first
    process forked into the new PID namespace must be our init."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:
            from ctypes.util import find_library  # noqa: PLC0415 - only where libc.so.6 is not found (slow import)

            _libc = ctypes.CDLL(find_library("c"), use_errno=True)
        _libc.mount.argtypes = (ctypes.c_char_p,) * 3 + (ctypes.c_ulong, ctypes.c_char_p)
    return _libc


def _mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    libc = _load_libc()

    def b(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    if libc.mount(b(source), b(target), b(fstype), flags, b(data)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount {source} on {target} ({fstype or 'bind'}): {os.strerror(e)}")


def check_tree(tree: Path) -> None:
    for d in OVERLAY_DIRS + ("proc", "sys"):
        if tree == Path("/" + d) or Path("/" + d) in tree.parents:
            raise SystemExit(f"hostsim: the tree {tree} must not live under /{d} (it is overlaid in the namespace)")
    if any(c in str(tree) for c in ",:\\\n"):
        raise SystemExit(f"hostsim: the tree path {tree} must not contain ',', ':' or '\\'")
    for d in ("lib", "bin", "sbin"):
        p = Path("/" + d)
        if p.exists() and not p.is_symlink():
            raise SystemExit(f"hostsim: /{d} is not a symlink into /usr on this machine (merged /usr needed)")
    if not (tree / ".hostsim" / "meta.json").is_file():
        raise SystemExit(f"hostsim: {tree} is not a simulated host tree (no .hostsim/meta.json)")


def setup_mounts(tree: Path) -> None:
    for d in OVERLAY_DIRS:
        real = Path("/" + d)
        if real.is_symlink() or not real.is_dir():
            continue
        upper, work = tree / d, tree / ".hostsim" / "ovl" / d
        upper.mkdir(exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        _mount("overlay", str(real), "overlay", 0, f"lowerdir={real},upperdir={upper},workdir={work}")
    tree_proc = sorted((tree / "proc").iterdir())
    _mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555")
    os.mkdir("/proc/.real")
    _mount("proc", "/proc/.real", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    names = {e.name for e in tree_proc}
    for name in os.listdir("/proc/.real"):
        if name not in names:
            os.symlink(f".real/{name}", f"/proc/{name}")
    for e in tree_proc:
        target = f"/proc/{e.name}"
        if e.is_dir():
            os.mkdir(target)
        else:
            open(target, "w").close()
        _mount(str(e), target, None, MS_BIND)
    _mount(None, "/proc", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount(str(tree / "sys"), "/sys", None, MS_BIND | MS_REC)
    # the simulated kernel's identity: /proc/sys/kernel/{osrelease,version} and the hostname (UTS namespace)
    import json  # noqa: PLC0415

    u = json.loads((tree / "run/gpuops-sim/uname.json").read_text())
    ident = tree / ".hostsim" / "ident"
    ident.mkdir(exist_ok=True)
    for name, text in (("osrelease", u["release"]), ("version", u["version"])):
        (ident / name).write_text(text + "\n")
        _mount(str(ident / name), f"/proc/.real/sys/kernel/{name}", None, MS_BIND)
        _mount(None, f"/proc/.real/sys/kernel/{name}", None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    hostname = (tree / "etc/hostname").read_text().strip() if (tree / "etc/hostname").exists() else "localhost"
    socket_name = hostname.encode()
    if _load_libc().sethostname(socket_name, len(socket_name)) != 0:
        raise OSError(ctypes.get_errno(), "sethostname")


def _status(st: int) -> int:
    return os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)


def _stats(files: list[Path]) -> dict[str, tuple[int, int]]:
    out = {}
    for f in files:
        try:
            s = f.stat()
            out[str(f)] = (s.st_mtime_ns, s.st_size)
        except OSError:
            pass
    return out


def init(tree: Path, cmd: list[str]) -> int:
    """PID 1 of the namespace."""
    setup_mounts(tree)
    try:
        _load_libc().prctl(PR_SET_NAME, b"systemd", 0, 0, 0)
    except (AttributeError, OSError):
        pass
    # The kernel's view of its files before the command starts: a write the command makes at once (before this loop
    # would otherwise have looked) is then a change, never mistaken for the initial state.
    from .hostfs import Host  # noqa: PLC0415
    from .kernel import apply, watched_files  # noqa: PLC0415

    host = Host(tree, inside=True)
    files = watched_files(host)
    seen = _stats(files)
    child = os.fork()
    if child == 0:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(s, signal.SIG_DFL)
        pyshim = str(Path(__file__).resolve().parent / "pyshim")  # os.uname() of the simulated kernel
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (pyshim, os.environ.get("PYTHONPATH")) if p)
        # the system directories a root shell of a real host has on its PATH (sudo's secure_path), after the caller's
        # own: the shims are at /usr/sbin/modprobe and /usr/bin/systemctl, and a caller's PATH may lack the sbin ones
        path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
        os.environ["PATH"] = os.pathsep.join(path + [d for d in SYSTEM_PATH if d not in path])
        try:
            os.execvp(cmd[0], cmd)
        except OSError as exc:
            print(f"hostsim: cannot run {cmd[0]}: {exc.strerror}", file=sys.stderr)
            os._exit(127)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(s, forward)
    # Between rounds, wait on a pidfd of the command: its exit ends the wait at once, not at the next round (a module
    # task of a simulated host would otherwise end POLL_S / 2 later on average)
    try:
        exited: int | None = os.pidfd_open(child)
    except (AttributeError, OSError):
        exited = None
    rc: int | None = None
    while rc is None:
        try:
            while True:
                pid, st = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                if pid == child:
                    rc = _status(st)
        except ChildProcessError:
            rc = 127 if rc is None else rc
        now = _stats(files)
        if now != seen:
            seen = now  # taken before apply(): a write racing with it is seen on the next round
            try:
                apply(host)
            except Exception:  # the kernel loop must survive a bad write; log it like an oops
                host.kernel_log("hostsim kernel: " + traceback.format_exc().replace("\n", " | "))
            files = watched_files(host)
        if rc is None:
            if exited is None:
                time.sleep(POLL_S)
            else:
                select.select([exited], [], [], POLL_S)
    if exited is not None:
        os.close(exited)
    if _stats(watched_files(host)) != seen:
        apply(host)
    return rc


def run(tree: str | os.PathLike[str], cmd: list[str]) -> int:
    """Run `cmd` in the host's namespace; returns its exit status."""
    t = Path(os.path.abspath(tree))
    check_tree(t)
    if os.geteuid() != 0:
        raise SystemExit("hostsim run needs root (it creates mount and PID namespaces)")
    if not cmd:
        cmd = [os.environ.get("SHELL", "/bin/sh")]
    sys.stdout.flush()
    sys.stderr.flush()
    _load_libc()
    from . import hostfs, kernel  # noqa: F401, PLC0415 - imported before the fork, like libc

    os.unshare(os.CLONE_NEWNS | os.CLONE_NEWPID | os.CLONE_NEWUTS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    pid = os.fork()
    if pid == 0:
        code = 126
        try:
            code = init(t, cmd)
        except BaseException as exc:  # noqa: BLE001 - report anything, never fall back into the caller
            print(f"hostsim: setting up the namespace of {t} failed: {exc}", file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(s, forward)
    while True:
        try:
            _pid, st = os.waitpid(pid, 0)
            return _status(st)
        except InterruptedError:
            continue


def main(argv: list[str] | None = None) -> int:
    """Entry point of the python wrapper: main(['--tree', TREE, '--', CMD...])."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) < 2 or argv[0] != "--tree":
        print("usage: runner --tree TREE -- CMD [ARGS...]", file=sys.stderr)
        return 2
    tree, rest = argv[1], argv[2:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    return run(tree, rest)

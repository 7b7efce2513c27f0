"""Confining a process that is about to run a job's host code (its launcher), irreversibly.

A job's `.cu` is built into a shared library and its launcher (`launch_gemm(M, N, K, ...)`) is
called from a process of ours, so that process runs a stranger's code with our rights. `confine`
takes those rights away, once the process has done its own set-up (imported its modules,
initialised CUDA, opened /dev/nvidia*: what is already open stays usable) and before it dlopens
the job's library, so that even the library's static constructors run confined:

  - Landlock: every filesystem right is handled and only `Allowance` is allowed (read-only paths,
    device files read-write with ioctl, at most a scratch folder to write); TCP bind and connect
    are denied (ABI 4); abstract UNIX sockets and signals to other processes are scoped (ABI 6).
  - seccomp (worker/launch/seccomp_filter.py, libseccomp through pyseccomp): new sockets, fork, exec,
    ptrace, other processes' memory and signals, io_uring, namespaces, mounts, modules, keyrings ... fail with EPERM (so the
    launcher sees an error return, and its case goes on); threads keep working.
  - no new privileges, no capabilities, no core file, optional CPU-time and file-size limits, and
    SIGKILL when the parent dies.

Only the standard library, pyseccomp and worker/launch/jail_terms.py are imported: the confined process
loads nothing of gemmwatch's configuration through this module. Import it (and pyseccomp) before any Landlock
layer: pyseccomp looks for libseccomp with ldconfig when it is imported.

Landlock restricts the calling thread and the threads it creates later. Before ABI 8
(LANDLOCK_RESTRICT_SELF_TSYNC) the threads that already exist keep the domain they had, so a
process that makes threads during set-up (CUDA does) should put a first, wider layer in place
while it is still single-threaded (`restrict_paths` with the set-up's own allowance, as
worker/launch/launcher_child.py does): a thread the job's code reaches later (a CUDA callback thread, say)
then has that layer's rights at most. The seccomp filter is synchronised to every thread.
"""

import ctypes
import os
import resource
import signal
import socket
import stat

from worker.launch.jail_terms import Allowance, Confinement, ConfinementUnavailable
from worker.launch.seccomp_filter import load_seccomp_filter

# --- Landlock (include/uapi/linux/landlock.h) -------------------------------------------------

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # same on x86_64 and arm64
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_RESTRICT_SELF_TSYNC = 1 << 3  # ABI 8: the domain goes to every thread of the process

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

# The rights a rule on a file (not a folder) may carry; the kernel refuses folder rights there.
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, disabled, gVisor)."""
    abi = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(abi), 0)


def handled_fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def _raise_errno(what: str):
    err = ctypes.get_errno()
    raise ConfinementUnavailable(f"{what}: {os.strerror(err)} (errno {err})")


def restrict_paths(allowance: Allowance, *, deny_tcp: bool = True, scope: bool = True, said: str | None = None) -> str:
    """One Landlock layer: every filesystem right handled, only `allowance` allowed; TCP bind and
    connect denied (ABI 4); abstract UNIX sockets and signals scoped to this domain (ABI 6).
    Layers stack: a later call can only take more away. Returns a line saying what it did (`said`
    names the allowance in that line instead of listing its paths)."""
    abi = landlock_abi()
    if abi < 1:
        raise ConfinementUnavailable("Landlock is not available in this kernel")
    handled_fs = handled_fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled_fs)
    size = 8
    if abi >= 4 and deny_tcp:
        # Handled with no port rule: no TCP port can be bound or connected to (UDP is not covered
        # by Landlock before ABI 10; the seccomp filter refuses every new socket anyway).
        attr.handled_access_net, size = NET_BIND_TCP | NET_CONNECT_TCP, 16
    if abi >= 6 and scope:
        attr.scoped, size = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL, 24
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        _raise_errno("landlock_create_ruleset")
    try:
        absent = _add_path_rules(ruleset, allowance, abi, handled_fs)
        # Landlock needs no_new_privs (or CAP_SYS_ADMIN); it is wanted anyway: no exec may gain rights.
        set_no_new_privs()
        flags = _RESTRICT_SELF_TSYNC if abi >= 8 else 0
        if _libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(flags)) != 0:
            _raise_errno("landlock_restrict_self")
    finally:
        os.close(ruleset)
    parts = [f"Landlock ABI {abi}: no path but {said or _summary(allowance)}"]
    if attr.handled_access_net:
        parts.append("no TCP bind or connect")
    if attr.scoped:
        parts.append("no abstract UNIX socket or signal outside the domain")
    parts.append("all threads" if flags else "this thread and the threads it makes")
    if absent:
        parts.append(f"absent, so not allowed: {', '.join(absent)}")
    return ", ".join(parts)


def _summary(allowance: Allowance) -> str:
    said = []
    if allowance.readable:
        said.append(f"reading {', '.join(allowance.readable)}")
    if allowance.devices:
        said.append(f"read/write/ioctl of {', '.join(allowance.devices)}")
    if allowance.writable:
        said.append(f"writing under {', '.join(allowance.writable)}")
    if allowance.executable:
        said.append(f"running programs under {', '.join(allowance.executable)}")
    return "; ".join(said) or "none"


def _add_path_rules(ruleset: int, allowance: Allowance, abi: int, handled_fs: int) -> list[str]:
    """A rule per path that exists; returns the paths that do not (nothing to allow there)."""
    read = FS_READ_FILE | FS_READ_DIR
    # Scratch: make, write, truncate, remove and move files and folders; never execute, and no
    # device, socket, FIFO or symbolic link.
    write = read | FS_WRITE_FILE | FS_MAKE_REG | FS_MAKE_DIR | FS_REMOVE_FILE | FS_REMOVE_DIR | FS_TRUNCATE | FS_REFER
    device = FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV
    run = read | FS_EXECUTE  # a compiler's toolkit: its programs run, its files read
    absent = []
    for paths, rights in ((allowance.readable, read), (allowance.writable, write), (allowance.devices, device),
                          (allowance.executable, run)):
        for path in paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                absent.append(path)
                continue
            try:
                allowed = rights & handled_fs
                if not stat.S_ISDIR(os.fstat(fd).st_mode):  # fstat: /proc may be out of reach already
                    allowed &= _FILE_RIGHTS
                rule = _PathBeneath(allowed_access=allowed, parent_fd=fd)
                if _libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                 ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    _raise_errno(f"landlock_add_rule {path}")
            finally:
                os.close(fd)
    return absent


# --- the rest: privileges, limits, the parent ----------------------------------------------------

_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


def set_no_new_privs() -> None:
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _raise_errno("prctl(PR_SET_NO_NEW_PRIVS)")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """No capability left (a worker running as root keeps none here): CAP_SYS_RESOURCE would raise
    the limits again, CAP_KILL reach any process, CAP_SYS_ADMIN and friends much more. Per thread,
    like Landlock: call it while single-threaded for threads made later to have none either."""
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on kernels without ambient caps
    header = _CapHeader(version=0x20080522, pid=0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        _raise_errno("capset")


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL when the parent dies (the thread that started this process, strictly: start it
    from a thread that lives as long as the wait for it). If the parent is already gone, exit."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        _raise_errno("prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent_pid:  # died before the line above: no signal will come
        os._exit(70)


def set_limits(*, cpu_seconds: int | None = None, file_bytes: int | None = None) -> list[str]:
    """Hard limits (they cannot be raised again without CAP_SYS_RESOURCE, which is dropped):
    no core file (it would hold whatever the process read), CPU time so that a spin ends even if
    nobody waits for it any more, a file size so that scratch and output cannot fill the disk."""
    said = ["no core file"]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cpu_seconds is not None:
        # SIGXCPU at the soft limit, SIGKILL a second later at the hard one.
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        said.append(f"{cpu_seconds} s of CPU")
    if file_bytes is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        said.append(f"files of {file_bytes} bytes at most")
    return said


def thread_count() -> int | None:
    """The threads of this process; None where /proc is out of reach (an earlier Landlock layer)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def confine(allowance: Allowance, *, parent_pid: int | None = None, cpu_seconds: int | None = None,
            file_bytes: int | None = None, require: bool = True) -> Confinement:
    """Confine this process for good; call it after the set-up, before the job's library is opened.

    allowance: what may still be opened (the job's build folder read-only, the CUDA library folders
    the library needs at dlopen, /dev/nvidia* read-write; a scratch folder if any).
    parent_pid: the process that waits for this one; its death kills this one.
    require: raise ConfinementUnavailable where Landlock or seccomp cannot be applied; False says
    go on with what could be applied (the result lists what is missing: warn about it).
    """
    threads = thread_count()  # before /proc is out of reach
    applied, missing = [], []
    if parent_pid is not None:
        die_with_parent(parent_pid)
        applied.append("SIGKILL when the parent dies")
    applied.append(", ".join(set_limits(cpu_seconds=cpu_seconds, file_bytes=file_bytes)))
    set_no_new_privs()
    applied.append("no new privileges")
    try:
        drop_capabilities()
        applied.append("no capabilities")
    except ConfinementUnavailable as exc:
        missing.append(str(exc))
    for measure in (lambda: restrict_paths(allowance), lambda: load_seccomp_filter()):
        try:
            applied.append(measure())
        except ConfinementUnavailable as exc:
            if require:
                raise
            missing.append(str(exc))
    if threads != 1 and landlock_abi() < 8:
        others = "the other threads" if threads is None else f"{threads - 1} other thread(s)"
        applied.append(f"{others} keep the Landlock domain they had (ABI < 8 has no TSYNC)")
    if not missing:
        _check_confined()
    return Confinement(tuple(applied), tuple(missing), threads)


def _check_confined() -> None:
    """Believe nothing: a path outside any allowance and a new socket must now both fail."""
    try:
        os.close(os.open("/", os.O_RDONLY | os.O_CLOEXEC))
    except PermissionError:
        pass
    else:
        raise ConfinementUnavailable("Landlock applied but / can still be opened")
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    except PermissionError:
        pass
    else:
        raise ConfinementUnavailable("seccomp filter loaded but a socket can still be made")

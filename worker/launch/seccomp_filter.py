"""The seccomp filter of a confined process (worker/launch/host_jail.py confine), through libseccomp's
pyseccomp: new sockets, fork, exec, ptrace, other processes' memory and signals, io_uring,
namespaces, mounts, modules, keyrings ... fail with EPERM, so the job's code sees an error return
and its case goes on; threads keep working. Standard library and pyseccomp only; import it before
any Landlock layer (pyseccomp looks for libseccomp with ldconfig when it is imported)."""

import errno
import os
import socket

import pyseccomp

from worker.launch.jail_terms import ConfinementUnavailable

_CLONE_THREAD = 0x00010000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_MM = 1, 4, 35
_PR_SET_PTRACER = 0x59616D61
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C

# System calls that fail with EPERM whatever their arguments: each reaches outside the process
# (a new process, another program, another process's memory, the network, the kernel's state).
REFUSED_CALLS = (
    "fork", "vfork", "execve", "execveat",  # no new process, no other program
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",  # no other process's memory
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "tkill",  # no other process by pid (tkill: any tid)
    "socket",  # no new socket of any family: TCP, UDP, raw, netlink, UNIX (the pipe to the parent is open already)
    "io_uring_setup", "io_uring_enter", "io_uring_register",  # its operations skip seccomp (IORING_OP_SOCKET ...)
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsmount", "fsconfig", "fspick", "mount_setattr",  # no namespaces, no mounts
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "iopl", "ioperm", "acct", "quotactl", "syslog",  # no kernel state
    "bpf", "perf_event_open", "userfaultfd",  # no tracing or exploitation aids
    "keyctl", "add_key", "request_key",  # the kernel keyrings may hold other programs' secrets
    "open_by_handle_at",  # opens a file by handle, past path-based rules
    "setrlimit",  # the limits set here stay (prlimit64 with a new limit is refused below)
    "setsid", "setpgid",  # stays in the process group the parent kills
)


def _conditional_refusals(own_pid: int) -> list[tuple[str, tuple]]:
    """System calls refused with EPERM for some arguments only: (name, comparisons), each
    comparison a pyseccomp.Arg; several rules on one call are alternatives."""
    A = pyseccomp.Arg
    return [
        # A thread is a clone with CLONE_THREAD; anything else (fork's clone, posix_spawn's) is a process.
        ("clone", (A(0, pyseccomp.MASKED_EQ, _CLONE_THREAD, 0),)),
        # Signals to this process only (the parent, the worker and its other children are out of reach).
        ("kill", (A(0, pyseccomp.NE, own_pid),)),
        ("tgkill", (A(0, pyseccomp.NE, own_pid),)),
        ("rt_sigqueueinfo", (A(0, pyseccomp.NE, own_pid),)),
        ("rt_tgsigqueueinfo", (A(0, pyseccomp.NE, own_pid),)),
        # socketpair is allowed for AF_UNIX only: a connected pair that reaches nothing outside.
        ("socketpair", (A(0, pyseccomp.NE, socket.AF_UNIX),)),
        # The parent's death must still kill it, nobody may attach to it, its memory map stays.
        ("prctl", (A(0, pyseccomp.EQ, _PR_SET_PDEATHSIG),)),
        ("prctl", (A(0, pyseccomp.EQ, _PR_SET_DUMPABLE),)),
        ("prctl", (A(0, pyseccomp.EQ, _PR_SET_PTRACER),)),
        ("prctl", (A(0, pyseccomp.EQ, _PR_SET_MM),)),
        ("prlimit64", (A(2, pyseccomp.NE, 0),)),  # reading a limit is fine, setting one is not
        # Typing into a terminal the process may hold (TIOCSTI), the console's ioctls (TIOCLINUX).
        ("ioctl", (A(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, _TIOCSTI),)),
        ("ioctl", (A(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, _TIOCLINUX),)),
    ]


def load_seccomp_filter(own_pid: int | None = None) -> str:
    """The filter, synchronised to every thread of the process (CUDA's included). Calls it names
    fail with EPERM; clone3 fails with ENOSYS, so that glibc falls back to clone, whose flags the
    filter can read (clone3 passes them in memory, out of a filter's sight). A 32-bit (int 0x80) or
    x32 system call fails with ENOSYS: the filter is for the native ABI only."""
    own_pid = os.getpid() if own_pid is None else own_pid
    eperm = pyseccomp.ERRNO(errno.EPERM)
    f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    f.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.ERRNO(errno.ENOSYS))
    f.set_attr(pyseccomp.Attr.CTL_NNP, 1)
    f.set_attr(pyseccomp.Attr.CTL_TSYNC, 1)
    unknown = []
    for name in REFUSED_CALLS:
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) < 0:
            unknown.append(name)  # not a system call on this architecture (iopl on arm64 ...)
            continue
        f.add_rule(eperm, name)
    for name, args in _conditional_refusals(own_pid):
        f.add_rule(eperm, name, *args)
    f.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    try:
        f.load()
    except OSError as exc:
        raise ConfinementUnavailable(f"seccomp filter not loaded: {exc}") from None
    return "seccomp: " + ", ".join(
        ["socket (socketpair but AF_UNIX)", "fork, vfork, clone without CLONE_THREAD, clone3 (ENOSYS)",
         "execve", "ptrace and other processes' memory", "signals to other processes",
         "prctl PDEATHSIG/DUMPABLE/PTRACER/MM", "io_uring", "namespaces, mounts, modules, keyrings, bpf",
         "setting limits"]) + " refused (EPERM) on every thread"

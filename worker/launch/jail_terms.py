"""The words of confinement (worker/launch/host_jail.py, worker/launch/seccomp_filter.py, worker/launch/launcher_child.py,
and the compile process, worker/compile/compile_sandbox.py, which takes its Landlock layer from host_jail too):
what a confined process may still open (`Allowance`), what was applied (`Confinement`), and why a
measure could not be (`ConfinementUnavailable`). Standard library only."""

from dataclasses import dataclass, field


class ConfinementUnavailable(RuntimeError):
    """A measure could not be applied (no Landlock in this kernel, no libseccomp ...)."""


@dataclass(frozen=True)
class Allowance:
    """What a confined process may still open. Anything not named here cannot be opened, listed,
    written, made or removed; files opened before confinement stay usable whatever this says."""

    readable: tuple[str, ...] = ()  # folders (read files, list) or single files, read-only
    writable: tuple[str, ...] = ()  # folders where files may be made, written and removed (scratch)
    devices: tuple[str, ...] = ()  # device files (/dev/nvidia*): read, write and ioctl
    executable: tuple[str, ...] = ()  # folders whose programs may be run, and read (a compiler's toolkit)

    def plus(self, other: "Allowance") -> "Allowance":
        return Allowance(self.readable + other.readable, self.writable + other.writable,
                         self.devices + other.devices, self.executable + other.executable)

    def as_dict(self) -> dict:
        return {"readable": list(self.readable), "writable": list(self.writable), "devices": list(self.devices),
                "executable": list(self.executable)}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Allowance":
        d = d or {}
        return cls(tuple(d.get("readable", ())), tuple(d.get("writable", ())), tuple(d.get("devices", ())),
                   tuple(d.get("executable", ())))


@dataclass(frozen=True)
class Confinement:
    """What `confine` applied, one line per measure, for the case's report and the worker's log."""

    applied: tuple[str, ...]
    missing: tuple[str, ...] = ()  # measures that could not be applied (only where the caller allowed it)
    threads_before: int | None = 1
    extra: dict = field(default_factory=dict)

    def describe(self) -> str:
        lines = list(self.applied)
        lines += [f"NOT applied: {m}" for m in self.missing]
        return "; ".join(lines)

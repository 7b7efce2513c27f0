"""Which GPU this is and what state it is in, read through NVML (nvidia-ml-py).

NVML ignores CUDA_VISIBLE_DEVICES, so a device is matched by PCI bus id or UUID, never by index.
"""

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pynvml

from core.records.gpu_records import gpu_model

@dataclass(frozen=True)
class VisibleGpu:
    index: int  # CUDA ordinal as this process sees it
    uuid: str
    name: str
    nvml_index: int = 0  # index on the host, as nvidia-smi numbers it

    @property
    def model(self) -> str:
        return gpu_model(self.name)


@contextmanager
def nvml():
    pynvml.nvmlInit()
    try:
        yield
    finally:
        pynvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_gpus() -> list[VisibleGpu]:
    """GPUs this process may use, honouring CUDA_VISIBLE_DEVICES; [] when there is no driver."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []
    try:
        all_gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            all_gpus.append((i, _text(pynvml.nvmlDeviceGetUUID(h)), _text(pynvml.nvmlDeviceGetName(h))))
    finally:
        pynvml.nvmlShutdown()
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mask is None:
        chosen = all_gpus
    else:
        chosen = []
        for token in filter(None, (t.strip() for t in mask.split(","))):
            match = [g for g in all_gpus if (token.isdigit() and g[0] == int(token)) or g[1].startswith(token)]
            if not match:
                break  # CUDA stops at the first invalid entry too
            chosen.append(match[0])
    return [VisibleGpu(ordinal, uuid, name, host_index) for ordinal, (host_index, uuid, name) in enumerate(chosen)]


# Clock-event reasons that mean the SM clock is being held below what was asked for. Idle,
# application clocks, sync boost and display clocks are not slowdowns of a running kernel.
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # SW power cap, HW slowdown, SW/HW thermal, power brake


def throttle_reasons(pci_bus_id: str) -> int:
    """The active throttle reasons (THROTTLE_MASK bits); 0 when running free or unreadable."""
    try:
        h = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
        return int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)) & THROTTLE_MASK
    except pynvml.NVMLError:
        return 0


def device_state(pci_bus_id: str) -> dict[str, Any]:
    """Clocks, temperature, power and throttle reasons now, for the device at this PCI bus id."""
    h = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
    state: dict[str, Any] = {}
    readers = {
        "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "throttle_reasons": lambda: int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)),
    }
    for key, read in readers.items():
        try:
            state[key] = read()
        except pynvml.NVMLError as exc:  # some fields are unsupported on some boards
            state[key] = None
            state.setdefault("unreadable", []).append(f"{key}: {exc}")
    return state


def static_identity(pci_bus_id: str) -> dict[str, Any]:
    return _identity_of(pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode()))


def registration_identity() -> dict[str, Any] | None:
    """The first visible GPU's identity through NVML alone, for a worker registering itself: no
    CUDA context is made in the worker process (the GPU child owns the one context). None: no GPU."""
    gpus = visible_gpus()
    if not gpus:
        return None
    with nvml():
        h = pynvml.nvmlDeviceGetHandleByUUID(gpus[0].uuid.encode())
        ident = _identity_of(h)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
    return {**ident, "index": gpus[0].nvml_index, "compute_capability": f"{major}.{minor}"}


def _or_none(read) -> Any:
    try:
        return read()
    except pynvml.NVMLError:  # unsupported on some boards (and under MIG)
        return None


def _identity_of(h) -> dict[str, Any]:
    name = _text(pynvml.nvmlDeviceGetName(h))
    return {
        "name": name,
        "model": gpu_model(name),
        "uuid": _text(pynvml.nvmlDeviceGetUUID(h)),
        "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
        "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024),
        "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
        # The memory roof of the roofline (dashboard/roofs.py): bus width x memory clock.
        "memory_bus_bits": _or_none(lambda: pynvml.nvmlDeviceGetMemoryBusWidth(h)),
        "max_mem_clock_mhz": _or_none(lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)),
    }

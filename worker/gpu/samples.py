"""What a device answers the timing loop (worker/measure/timing.py) for one batch of timed calls."""

from dataclasses import dataclass


@dataclass
class Batch:
    times_ms: list[float]  # one per call of the order, in order
    timed_out: bool  # a stream hold gave up before the host released it: the GPU may have waited for launches
    throttle_reasons: int  # NVML's clock-event reasons seen during the batch (0: none)

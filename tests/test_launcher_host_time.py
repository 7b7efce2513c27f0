"""How long a launcher's call held the host, and whether that says it waits for its kernel
(worker/measure/launcher_hook.host_time; on the GPU: tests/test_gpu_launchers.py)."""

import pytest

from worker.measure.launcher_hook import WAIT_JUDGED_FROM_MS, WAIT_SHARE, host_time


def test_a_call_that_holds_the_host_about_its_kernels_time_waits_and_one_that_returns_does_not():
    kernel_ms = 0.4  # h100_gemm's pc_pipeline at 4096^3
    assert host_time([0.41, 0.42, 0.40, 3.0], kernel_ms) == {"host_call_ms": 0.415, "waits": True}
    assert host_time([0.02, 0.015, 0.5], kernel_ms) == {"host_call_ms": 0.02, "waits": False}
    # the line: WAIT_SHARE of the kernel's sample
    assert host_time([WAIT_SHARE * kernel_ms], kernel_ms)["waits"] is True
    assert host_time([0.99 * WAIT_SHARE * kernel_ms], kernel_ms)["waits"] is False


@pytest.mark.parametrize("kernel_ms", [0.01, None])
def test_a_sample_too_short_to_tell_a_wait_from_a_launch_is_not_judged(kernel_ms):
    assert kernel_ms is None or kernel_ms < WAIT_JUDGED_FROM_MS
    assert host_time([0.012, 0.011], kernel_ms) == {"host_call_ms": 0.0115}


def test_no_call_no_record():
    assert host_time([], 1.0) == {}


@pytest.mark.parametrize(("reported", "kept"), [
    ({"launcher": {"host_call_ms": 0.4, "waits": True}}, {"host_call_ms": 0.4, "waits": True}),
    ({"launcher": {"host_call_ms": 0.4, "waits": True, "what_happened": "all fine"}}, {"host_call_ms": 0.4, "waits": True}),
    ({"launcher": {"host_call_ms": "0.4 ms", "waits": True}}, {}),
    ({"launcher": {"host_call_ms": 0.4, "waits": "yes"}}, {}),
    ({"launcher": {"host_call_ms": -1.0}}, {}),
    ({"launcher": "waits"}, {}),
    ({}, {}),
])
def test_the_parent_keeps_only_a_well_typed_host_time_from_the_confined_process(reported, kept):
    """That process ran the job's code: it may report anything, and only these two keys, of their types, are kept
    (the rest of the launcher's record is the worker's own)."""
    from worker.measure.launcher_case import reported_host_time

    assert reported_host_time(reported) == kept

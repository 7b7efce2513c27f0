"""Issue 48, must-show 3: a kernel or launcher that does not do the same work on every call is
told so (worker/measure/verify.py): runs 1 and 2 of the check are the same call over different C, and
run 1 is made again after the timed calls. NumPy stands in for the device's array module."""

import numpy as np
import pytest

from worker.measure import verify

TOL = 1e-4
RNG = np.random.default_rng(5)
A, B = RNG.uniform(-1, 1, (12, 7)).astype(np.float32), RNG.uniform(-1, 1, (7, 9)).astype(np.float32)
REF = A @ B


def refill(c, fill=None, seed=None):
    c[...] = fill if fill is not None else np.random.default_rng(seed).uniform(-1, 1, c.shape)


def checked(kernel) -> tuple[bool, str | None]:
    calls = []

    def run(c, alpha, beta):
        calls.append(1)
        c[...] = kernel(len(calls), alpha, beta, c)

    c = np.zeros_like(REF)
    return verify.check(np, run, REF, c, refill, seed=3, synchronize=lambda: None).verdict(TOL)


def right(_call, alpha, beta, c):
    return alpha * REF + beta * c


@pytest.mark.parametrize(("kernel", "same_work_said"), [
    (lambda call, alpha, beta, c: right(call, alpha, beta, c) * (1.0 if call % 2 else 0.5), True),  # every other call
    (lambda call, alpha, beta, c: right(call, alpha, beta, c) if call == 1 else c, True),  # right once, then nothing
    (lambda call, alpha, beta, c: alpha * REF, False),  # ignores beta: run 3 wrong, every call the same
    (lambda call, alpha, beta, c: 0.5 * right(call, alpha, beta, c), False),  # wrong on every call
])
def test_only_a_kernel_whose_same_call_differs_is_said_to_do_other_work(kernel, same_work_said):
    verified, why = checked(kernel)
    assert not verified
    assert (verify.NOT_THE_SAME_WORK in why) == same_work_said, why


def test_a_right_kernel_is_verified():
    assert checked(right) == (True, None)


def test_the_call_after_timing_is_judged_as_run_1():
    assert verify.after_timing(0, 0.5e-4, 100, TOL) is None
    unwritten = verify.after_timing(100, float("inf"), 100, TOL)
    assert "left 100 of 100 elements of C unwritten" in unwritten and verify.NOT_THE_SAME_WORK in unwritten
    wrong = verify.after_timing(0, 0.25, 100, TOL)
    assert "had a relative error of 0.25 > 0.0001" in wrong and "its timing is not used" in wrong

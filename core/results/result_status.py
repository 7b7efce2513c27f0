"""What became of one case, as a word every reader can filter and count on: the result's status.

Before it, a reader told a wrong kernel from a failed compile, or from a kernel built for another
GPU, by `verified` and the first words of a free-text error. The worker now says which when it
writes the result (worker/measure/runner.py, worker/measure/ab.py, worker/gpu_process.py), a posted result may say
it, and where neither does it is read from the other fields (`status_of`).
"""

from typing import Literal, get_args

ResultStatus = Literal["passed", "incorrect", "not applicable", "failed", "cancelled"]
STATUSES: tuple[str, ...] = get_args(ResultStatus)
# Not run by design: no speed, no failure. Verdicts, confirmations and the overview's ladders pass it over.
NOT_APPLICABLE: ResultStatus = "not applicable"

MEANING = {
    "passed": "verified against the reference, and timed",
    "incorrect": "ran, and its C disagreed with the reference beyond the tolerance (or held NaN or Inf)",
    "not applicable": "not run: built for another GPU target, a precision this GPU lacks, or sizes compiled in "
                      "(or a tile each size must be a multiple of) that are not this case's",
    "failed": "no verdict on the kernel: it did not compile, crashed, ran out of time or budget, or had no usable samples",
    "cancelled": "stopped part-way because its job was cancelled",
}


def status_of(verified: bool, error: str | None, rel_error: float | None, not_applicable: bool = False) -> str:
    """The status the fields imply: a result that was verified and has no error passed; one whose
    relative error was measured and not verified is incorrect; the rest failed."""
    if not_applicable:
        return NOT_APPLICABLE
    if verified:
        return "passed" if not error else "failed"
    return "incorrect" if rel_error is not None else "failed"

"""`gemmwatch ci` with the A/B confirmation: parents sent, the change confirmed in one job, both
verdicts and the ratio's interval in the summary; `--no-confirm` keeps the history verdict."""

import pytest

from cli.ci import exit_code, looks_changed, summary
from tests.test_ci_hook import CI_DEADLINE, KERNEL, SLOWER, ci, kernels_dir, server  # noqa: F401 (fixture)

pytestmark = CI_DEADLINE  # it waits on `gemmwatch ci` (tests/test_ci_hook.py)


@pytest.mark.long
def test_a_slowed_commit_is_confirmed_against_its_first_parent(server, tmp_path):  # noqa: F811
    url, token = server
    same, slow = kernels_dir(tmp_path / "a", KERNEL), kernels_dir(tmp_path / "b", SLOWER)
    first = ci(url, token, tmp_path, "--commit", "abab0001", "--branch", "main", "--parents", "", "--kernels-dir", str(same))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Confirmed in one job" not in first.stdout  # nothing to confirm without a baseline

    slowed = ci(url, token, tmp_path, "--commit", "abab0002", "--branch", "main", "--parents", "abab0001",
                "--kernels-dir", str(slow))
    assert slowed.returncode == 1, slowed.stdout + slowed.stderr
    assert "Confirmed in one job" in slowed.stdout
    row = next(line for line in slowed.stdout.splitlines() if line.startswith("| my_gemm") and "pairs" not in line
               and "[" in line)
    assert "❌ regression" in row  # the paired verdict, with its interval in the row
    assert "head/base time" in slowed.stdout and "99 % CI" in slowed.stdout

    history_only = ci(url, token, tmp_path, "--commit", "abab0003", "--branch", "main", "--parents", "abab0001",
                      "--kernels-dir", str(slow), "--no-confirm")
    assert history_only.returncode == 1, history_only.stdout + history_only.stderr
    assert "Confirmed in one job" not in history_only.stdout and "❌ regression" in history_only.stdout


def _verdict(status, variant="v"):
    return {"variant": variant, "m": 1, "n": 1, "k": 1, "status": status}


def test_the_confirmation_decides_the_exit_code():
    job = {"status": "succeeded"}
    history = [_verdict("regression")]
    assert exit_code(job, history) == 1
    assert exit_code(job, history, [_verdict("no change")]) == 0  # the history's alarm was drift
    assert exit_code(job, history, [_verdict("undecided")]) == 0
    assert exit_code(job, history, [_verdict("failed")]) == 2  # not re-measured: the build cannot tell
    assert exit_code(job, [_verdict("ok")], [_verdict("failed")]) == 2
    assert exit_code(job, [_verdict("faster")], [_verdict("regression")]) == 1
    assert exit_code({"status": "failed"}, history, [_verdict("no change")]) == 2
    assert looks_changed([_verdict("ok"), _verdict("faster", "f"), _verdict("regression", "r")]) == [
        _verdict("faster", "f"), _verdict("regression", "r")]


def _history(status, delta):
    return {**_verdict(status), "gflops": 100.0, "pct_of_cublas": 50.0, "delta": delta, "reason": f"{status} reason"}


def test_a_row_shows_the_confirmed_verdict_not_the_overturned_alarm():
    job = {"status": "succeeded", "commit": {"sha": "c" * 40}, "queue": "gpu.any", "ran_on": "H100"}
    drift = [_history("regression", -0.197)]
    text = summary(job, drift, "base", [{**_verdict("no change"), "ratio": 1.0003, "low": 0.99, "high": 1.01,
                                         "pairs": 34, "reason": "inside the band"}])
    row = next(line for line in text.splitlines() if line.startswith("| v | 1×1×1 | 100"))
    assert "✅ ok (same-job A/B; history said regression)" in row and "❌" not in text
    assert "Regressions:" not in text
    # Not re-measured: the row says the confirmation failed, beside what the history said.
    failed = summary(job, drift, "base", [{**_verdict("failed"), "ratio": None, "low": None, "high": None,
                                           "pairs": 0, "reason": "compile error"}])
    assert "❌ confirmation failed (same-job A/B; history said regression)" in failed
    assert "compile error" in failed
    # A regression the history missed is shown as one, and fails the build.
    missed = [_history("ok", -0.004)]
    confirmed = [{**_verdict("regression"), "ratio": 1.046, "low": 1.045, "high": 1.047, "pairs": 40, "reason": "slower"}]
    assert "❌ regression (same-job A/B; history said ok)" in summary(job, missed, "base", confirmed)
    assert exit_code(job, missed, confirmed) == 1


def test_a_confirmation_speaks_for_its_own_gemm_form_only():
    """One kernel at one size timed alone and in a batch of 8 (two GEMM forms): the batch's
    confirmation overturns the batch row's alarm and leaves the other row's verdict as it was; each
    row says its form where it is not the default."""
    job = {"status": "succeeded", "commit": {"sha": "c" * 40}, "queue": "gpu.any", "ran_on": "H100"}
    rows = [_history("faster", 0.05), {**_history("regression", -0.2), "form": "rrr+batch8"}]
    confirmed = [{**_verdict("no change"), "form": "rrr+batch8", "ratio": 1.0003, "low": 0.99, "high": 1.01,
                  "pairs": 34, "reason": "inside the band"}]
    text = summary(job, rows, "base", confirmed)
    alone, batch = [line for line in text.splitlines() if line.startswith("| v | 1×1×1") and "| 100 |" in line]
    assert alone.startswith("| v | 1×1×1 | 100") and alone.endswith("| 🚀 faster |")
    assert batch.startswith("| v | 1×1×1 rrr+batch8 | 100") and "✅ ok (same-job A/B; history said regression)" in batch
    assert exit_code(job, rows, confirmed) == 0


def test_a_job_that_failed_before_its_first_result_shows_its_error_and_no_empty_table():
    job = {"status": "failed", "commit": {"sha": "c" * 40}, "queue": "gpu.any", "ran_on": None,
           "error": "no CUDA device: CuPy is not usable here"}
    text = summary(job, [], "base")
    assert "| variant |" not in text and "| --- |" not in text
    assert "Job failed:" in text and "no CUDA device: CuPy is not usable here" in text
    with_rows = summary({**job, "status": "succeeded", "error": None}, [_history("ok", 0.0)], "base")
    assert "| variant | size | GFLOPS |" in with_rows


def test_a_changed_toolchain_is_listed_whatever_the_verdict():
    job = {"status": "succeeded", "commit": {"sha": "c" * 40}, "queue": "gpu.any", "ran_on": "H200"}
    changed = "the environment changed between base and head (compiler Triton 3.5.0 -> Triton 3.6.0)"
    ok = {**_history("ok", -0.004), "reason": f"{changed}: the difference may be its, not the kernel's; within noise"}
    slow = {**_history("regression", -0.2), "variant": "r", "reason": f"{changed}: the difference may be its, not "
                                                                       "the kernel's; 20 % below"}
    text = summary(job, [ok, slow], "base")
    toolchain = text.split("Environment:")[1]
    assert f"- v 1×1×1: {changed}" in toolchain and "within noise" not in toolchain
    assert "- r " not in toolchain  # a regression's whole reason is under "Regressions:" already
    assert "Environment:" not in summary(job, [_history("ok", 0.0)], "base")

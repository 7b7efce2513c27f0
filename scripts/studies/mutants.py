"""The statistics mutants of issue 38: apply each mutation to a copy of the product and run the tests
that should catch it; print which test caught it, or that it survived.

    .venv/bin/python scripts/studies/mutants.py [--tests tests/test_statistics_mutants.py ...] [--only 3,7a]

The working tree is never written: the folders the tests import (api, cli, core, dashboard, kernels,
migrations, tests, worker, with alembic.ini and pyproject.toml) are copied to a temporary folder,
the mutation is made there in a textual replacement (each `old` must occur exactly once, or the
script stops: a mutant that no longer applies is reported, not silently skipped), and pytest runs in
that folder (its own directory first on sys.path, no bytecode written) with the project's venv. The
pristine copy must pass first. Exit status 0 only when every mutant is caught.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = ["api", "cli", "core", "dashboard", "kernels", "migrations", "tests", "worker", "alembic.ini", "pyproject.toml"]
DEFAULT_TESTS = ["tests/test_statistics_mutants.py"]


@dataclass(frozen=True)
class Mutant:
    key: str
    what: str
    path: str
    edits: tuple[tuple[str, str], ...]


MUTANTS = [
    Mutant("1a", "regression window takes the oldest results", "core/verdicts/regression.py",
           (("recent = history[-th.window:]", "recent = history[:th.window]"),)),
    Mutant("1b", "ancestry baseline keeps the oldest rows of its window", "core/verdicts/baselines.py",
           (("for g, noise, n, q1, q3, med, _, _ in rows[-window:]]", "for g, noise, n, q1, q3, med, _, _ in rows[:window]]"),)),
    Mutant("1c", "time-ordered baseline keeps the oldest rows", "core/verdicts/baselines.py",
           ((".order_by(_COMMIT_TIME.desc(), Result.id.desc()).limit(window)",
             ".order_by(_COMMIT_TIME.asc(), Result.id.asc()).limit(window)"),)),
    Mutant("2a", "history verdict ignores the head's own noise", "core/verdicts/regression.py",
           (("own_se = 1.2533 * current.noise * current.value / math.sqrt(current.n_samples)", "own_se = 0.0"),)),
    Mutant("2b", "few-results verdict ignores the head's own noise", "core/verdicts/regression.py",
           (("combined = math.sqrt((current.noise or 0.0) ** 2 + ", "combined = math.sqrt(0.0 + "),)),
    Mutant("3", "Student t with n instead of n-1 degrees of freedom", "core/verdicts/regression.py",
           (("t_quantile(th.boundary, n - 1)", "t_quantile(th.boundary, n)"),)),
    Mutant("4", "sqrt(1+1/n) -> sqrt(1/n) in the prediction interval", "core/verdicts/regression.py",
           (("sd**2 * (1 + 1 / n)", "sd**2 * (1 / n)"),)),
    Mutant("5", "A/B verdict from the point ratio, not the interval", "core/verdicts/regression.py",
           (("if low > band_high:", "if ratio > band_high:"),
            ("elif high < band_low:", "elif ratio < band_low:"),
            ("elif low >= band_low and high <= band_high:", "elif band_low <= ratio <= band_high:"))),
    Mutant("6", "pairing lost: head samples shuffled against base", "core/verdicts/regression.py",
           (("ratios = np.asarray(head_ms, dtype=float) / np.asarray(base_ms, dtype=float)",
             "ratios = np.random.default_rng(12345).permutation(np.asarray(head_ms, dtype=float))"
             " / np.asarray(base_ms, dtype=float)"),)),
    Mutant("7a", "bootstrap interval's tail doubled (99 % read as 1 % a tail)", "core/verdicts/regression.py",
           (("tail = (1 - confidence) / 2", "tail = 1 - confidence"),)),
    Mutant("7b", "median interval with a one-sided z (1.645 for 1.96)", "core/results/sample_stats.py",
           (("Z95 = 1.96", "Z95 = 1.645"),)),
    Mutant("9a", "oldest sha-prefix match as the confirmation's base", "core/verdicts/confirm.py",
           ((".order_by(Commit.id.desc()))", ".order_by(Commit.id.asc()))"),)),
    Mutant("9b", "oldest sha-prefix match as the verdicts' base", "core/verdicts/baselines.py",
           ((".order_by(Commit.id.desc()))", ".order_by(Commit.id.asc()))"),)),
    Mutant("10a", "NaN/Inf relative error read as 0", "worker/measure/verify.py",
           (('return err if err == err and err != float("inf") else float("inf")',
             'return err if err == err and err != float("inf") else 0.0'),)),
    Mutant("10b", "a NaN error compared as passing in the verdict", "worker/measure/verify.py",
           (("if not self.rel_error <= tolerance:", "if self.rel_error > tolerance:"),)),
    # Issue 51's survivors of rules, caught by tests/test_rule_mutants.py.
    Mutant("51a", "FP8's bound counts K/32 rounded down", "core/description/precision.py",
           (("steps = -(-k // FP8_MMA_K)", "steps = k // FP8_MMA_K"),)),
    Mutant("51b", "a verified result with an error reported passed", "core/results/result_status.py",
           (('return "passed" if not error else "failed"', 'return "passed"'),)),
    Mutant("51c", "FP16 sums accepted with an FP32 C", "core/description/gemm_form.py",
           (('if accumulate == "fp16" and (compute_mode != "fp16" or output != "input"):',
             'if accumulate == "fp16" and compute_mode != "fp16":'),)),
    Mutant("51d", "batch strides accepted without a batch", "core/description/gemm_form.py",
           (('if "batch" not in args and any(a.startswith("stride_") for a in args):', "if False:"),)),
    Mutant("51e", "a result's noise without the /1.349", "core/verdicts/baselines.py",
           (("return (q3 - q1) / IQR_PER_SIGMA / median", "return (q3 - q1) / median"),)),
    Mutant("51f", "cuBLAS's best: index <= 0 read as the default", "worker/measure/cublas_best.py",
           (('"default" if best["index"] < 0 else "best"', '"default" if best["index"] <= 0 else "best"'),)),
    Mutant("51g", "cuBLAS's best: the chosen candidate's C never checked", "worker/measure/runner.py",
           (("            if error > bound:\n                plan = {**plan, \"against\": \"default\",",
             "            if False:\n                plan = {**plan, \"against\": \"default\","),)),
    Mutant("51h", "a wrong C with no measurable error left to the fields (reported failed)", "worker/measure/runner.py",
           (('            if not out.verified:\n                out.status = "incorrect"\n',
             "            pass\n"),)),
    # cuBLAS's call in a kernel's form, caught on the CPU by tests/test_cublas_forms_call.py.
    Mutant("51i", "cuBLAS's form call: the two transposes swapped", "worker/gpu/cublas_forms.py",
           (("transa, transb = CUBLAS_OP[plan.transa], CUBLAS_OP[plan.transb]",
             "transa, transb = CUBLAS_OP[plan.transb], CUBLAS_OP[plan.transa]"),)),
    Mutant("51j", "cuBLAS's form call: FP32 alpha and beta under FP16 compute", "worker/gpu/cublas_forms.py",
           (("scalar = np.float16 if computing == CUBLAS_COMPUTE_16F else np.float32", "scalar = np.float32"),)),
    Mutant("51k", "cuBLAS's form call: lda and ldb swapped", "worker/gpu/cublas_forms.py",
           (("plan.lda, second.data.ptr, in_type, plan.ldb, beta.ctypes.data",
             "plan.ldb, second.data.ptr, in_type, plan.lda, beta.ctypes.data"),)),
    # The profile summary, caught by tests/test_rule_mutants.py.
    Mutant("51l", "profile summary: a group named once per row, not once", "core/profile/profile_diff.py",
           (("            if change.group not in seen:\n", "            if True:\n"),)),
    Mutant("51m", "profile rows: a relative magnitude uncapped", "core/profile/profile_changes.py",
           (("return min(1.0, delta / abs(base)) if base else 1.0", "return delta / abs(base) if base else 1.0"),)),
    Mutant("51n", "profile rows: a main-loop class weighed against the whole function", "core/profile/profile_diff.py",
           (("magnitude(\"appear\" if spill else \"share\", lb[cls], lh[cls], length)",
             "magnitude(\"appear\" if spill else \"share\", lb[cls], lh[cls], total)"),)),
]


def copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)


def apply(text: str, m: Mutant) -> tuple[str, int]:
    """The mutated text and the 1-based line of the first edit (in the original)."""
    first_line = None
    for old, new in m.edits:
        count = text.count(old)
        if count != 1:
            raise SystemExit(f"mutant {m.key}: {old!r} occurs {count} times in {m.path}; update the mutant")
        if first_line is None:
            first_line = text[:text.index(old)].count("\n") + 1
        text = text.replace(old, new)
    return text, first_line


def run_tests(where: Path, tests: list[str]) -> tuple[int, list[str], str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(where)}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", "--timeout", "600", *tests]
    proc = subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True)
    failed = sorted({line.split()[1].split("::", 1)[1] for line in proc.stdout.splitlines()
                     if line.startswith(("FAILED ", "ERROR ")) and "::" in line})
    return proc.returncode, failed, proc.stdout[-3000:] + proc.stderr[-2000:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", nargs="+", default=DEFAULT_TESTS, help="test files or node ids, relative to the repo")
    ap.add_argument("--only", default="", help="comma-separated mutant keys (default: all)")
    args = ap.parse_args()
    chosen = [m for m in MUTANTS if not args.only or m.key in args.only.split(",")]

    with tempfile.TemporaryDirectory(prefix="gemmwatch-mutants-") as tmp:
        work = Path(tmp)
        copy_tree(work)
        where = subprocess.run([sys.executable, "-c", "import core.verdicts.regression as r; print(r.__file__)"], cwd=work,
                               env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(work)},
                               capture_output=True, text=True).stdout.strip()
        if not where.startswith(str(work)):
            raise SystemExit(f"the copy does not import its own modules (core.verdicts.regression from {where!r})")
        t0 = time.monotonic()
        rc, failed, tail = run_tests(work, args.tests)
        if rc != 0:
            print(tail)
            raise SystemExit(f"the unmutated copy fails {failed}: fix the tests first")
        print(f"unmutated: pass ({time.monotonic() - t0:.0f} s)", flush=True)

        rows, survivors = [], 0
        for m in chosen:
            target = work / m.path
            original = (ROOT / m.path).read_text()
            mutated, line = apply(original, m)
            target.write_text(mutated)
            try:
                rc, failed, tail = run_tests(work, args.tests)
            finally:
                target.write_text(original)
            if rc == 0:
                survivors += 1
                verdict = "SURVIVED"
            elif failed:
                verdict = "caught by " + ", ".join(failed)
            else:  # a collection or import error is no proof that a test catches it
                survivors += 1
                verdict = "BROKEN (no test failed: " + (re.findall(r"\w*Error.*", tail) or ["?"])[-1][:80] + ")"
            rows.append((m.key, m.what, f"{m.path}:{line}", verdict))
            print(f"{m.key:>4}  {m.path}:{line}  {verdict}", flush=True)

    print()
    print("| # | mutation | where | result |")
    print("| --- | --- | --- | --- |")
    for key, what, where, verdict in rows:
        print(f"| {key} | {what} | `{where}` | {verdict} |")
    print(f"\n{len(rows) - survivors} of {len(rows)} caught")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())

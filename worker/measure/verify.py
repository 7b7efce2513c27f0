"""Is the kernel's C right? Four runs against the FP32 product of its inputs, each proving one thing.

1. Every element written: C is filled with a value no product of these inputs comes near
   (3e38; FP16's largest, 65504, for an FP16 C) and the kernel runs at beta = 0. An element still holding it was never written. A
   kernel that reads C at beta = 0 gets 0 * 3e38 = 0 and loses nothing, so this holds for both
   conventions.
2. beta = 0 over a finite random C: the relative Frobenius error against A·B.
3. alpha = 0.75, beta = -0.5 over the same random C: against 0.75 A·B - 0.5 C.
4. The NaN probe: C filled with NaN at beta = 0. With every element written (1), a NaN left in
   C means the kernel read C although beta was 0. BLAS leaves C unread then; many hand-written
   kernels compute alpha * acc + beta * C anyway, which is right for every finite C (2, 3). That
   is a convention, reported as such (env.c_convention), not a wrong result.

The verdict is the worst error of 1-3 against the kernel's tolerance. Runs 1 and 2 are the same
call (alpha 1, beta 0) over different C: where one is right and the other wrong, the verdict says
that the kernel does not do the same work on every call. And after the timed calls, the runner
makes run 1 once more (`after_timing`): a kernel or launcher that works while it is checked and
then launches something else, or nothing, loses its timing (worker/measure/runner.py).

Array work goes through the device's array module (CuPy on a GPU, NumPy in the tests), so this
code judges on both.
"""

from collections.abc import Callable
from dataclasses import dataclass

SENTINEL = 3.0e38  # finite, and far beyond any |A·B| of inputs in [-1, 1) with K <= 2^20

NOT_THE_SAME_WORK = ("the kernel does not do the same work on every call (a launcher that launches another kernel, "
                     "or none, on some calls; a kernel that counts its calls)")
READS_C = "reads C when beta = 0 (C * 0 is added: a NaN in C spreads); BLAS leaves C unread then"
LEAVES_C = "leaves C unread when beta = 0, as BLAS does"
WRITE_ONLY = "C is only written (its epilogue takes no beta)"


@dataclass
class Check:
    rel_error: float  # the worst of checks 1-3 (inf where NaN or Inf came out)
    unwritten: int  # elements of C that kept the sentinel
    total: int
    reads_c_at_beta_zero: bool
    sentinel: float = SENTINEL
    write_only: bool = False  # an epilogue without beta (ab_only, alpha_only): C is no input
    same_call: tuple[float, float] = (0.0, 0.0)  # the errors of runs 1 and 2, the same call (inf: unwritten)

    def verdict(self, tolerance: float) -> tuple[bool, str | None]:
        """(verified, why not)."""
        verified, why = self._verdict(tolerance)
        first, second = (e <= tolerance for e in self.same_call)
        if not verified and first != second:
            right, wrong = (1, 2) if first else (2, 1)
            why = f"{why}; yet run {right}, the same call as run {wrong} (alpha 1, beta 0), was right: {NOT_THE_SAME_WORK}"
        return verified, why

    def _verdict(self, tolerance: float) -> tuple[bool, str | None]:
        if self.unwritten == self.total:
            return False, (f"wrong result: no element of C was written (C was filled with {self.sentinel:g} before a "
                           "run at beta = 0, and all kept it): the kernel launched nothing, or wrote elsewhere (a C "
                           "of an earlier call it kept, or after the run on a stream of its own)")
        if self.unwritten:
            return False, (f"wrong result: {self.unwritten} of {self.total} elements of C never written (C was "
                           f"filled with {self.sentinel:g} before a run at beta = 0, and they kept it)")
        if self.rel_error == float("inf"):
            return False, "wrong result: C holds NaN or Inf after a run with finite A, B and C"
        if not self.rel_error <= tolerance:
            return False, f"wrong result: relative error {self.rel_error:.3g} > {tolerance:g}"
        return True, None

    @property
    def convention(self) -> str:
        return WRITE_ONLY if self.write_only else READS_C if self.reads_c_at_beta_zero else LEAVES_C


# run(c, alpha, beta): the kernel, over c. refill(c, fill=None, seed=None): C's elements, in place,
# all `fill` or uniform values in [-1, 1) from `seed`.
Run = Callable[[object, float, float], None]
Refill = Callable[..., None]


def check(xp, run: Run, ref, c, refill: Refill, seed: int, synchronize: Callable[[], None],
          read: Callable[[object], object] = lambda c: c, sentinel: float = SENTINEL,
          epilogue: str = "alpha_beta") -> Check:
    """Every run writes the same C, refilled in place before it: the kernel gets the addresses a
    home runner gives it on every call, so a launcher that keeps C's tensor map from its first call
    is right here where it is right at home. `read(c)`: C's values in FP32 (C may be FP16 or BF16);
    `sentinel`: the unreachable fill, a value of C's type (core/description/precision.py Precision.sentinel);
    `epilogue` (core/description/gemm_form.py): what the kernel computes with the scalars. An ab_only kernel
    takes neither, so run 3 would repeat run 2 and is skipped; an alpha_only one must scale by
    alpha and ignore C. Where C is no input, the NaN probe is a check like the others: a NaN left
    in C is a wrong result."""
    unwritten, first = sentinel_run(xp, run, ref, c, refill, synchronize, read, sentinel)
    errors = [first]

    refill(c, seed=seed + 1)
    c0 = read(c).copy()
    run(c, 1.0, 0.0)
    errors.append(rel_error(xp, read(c), ref))
    if epilogue != "ab_only":
        refill(c, seed=seed + 1)
        run(c, 0.75, -0.5)
        expected = 0.75 * ref - 0.5 * c0 if epilogue == "alpha_beta" else 0.75 * ref
        errors.append(rel_error(xp, read(c), expected))

    refill(c, fill=float("nan"))
    run(c, 1.0, 0.0)
    synchronize()
    nan_left = bool(xp.isnan(read(c)).any()) and unwritten == 0
    write_only = epilogue != "alpha_beta"
    if write_only:
        errors.append(rel_error(xp, read(c), ref))
    return Check(max(errors), unwritten, int(ref.size), nan_left and not write_only, sentinel, write_only,
                 (errors[0] if not unwritten else float("inf"), errors[1]))


def sentinel_run(xp, run: Run, ref, c, refill: Refill, synchronize: Callable[[], None],
                 read: Callable[[object], object], sentinel: float) -> tuple[int, float]:
    """Run 1: C filled with the sentinel, one run at alpha 1, beta 0; (elements it left unwritten,
    its relative error)."""
    refill(c, fill=sentinel)
    run(c, 1.0, 0.0)
    synchronize()
    unwritten = int((read(c) == xp.float32(sentinel)).sum())
    return unwritten, rel_error(xp, read(c), ref)


def after_timing(unwritten: int, error: float, total: int, tolerance: float) -> str | None:
    """Why run 1 made again after the timed calls says their timing cannot stand, or None."""
    if unwritten:
        what = f"left {unwritten} of {total} elements of C unwritten"
    elif not error <= tolerance:
        what = f"had a relative error of {error:.3g} > {tolerance:g}"
    else:
        return None
    return (f"wrong result after timing: the call after the timed ones (run 1 again: C filled with a sentinel, alpha 1, "
            f"beta 0) {what}, where the calls checked before timing were right: {NOT_THE_SAME_WORK}; its timing is "
            "not used")


def rel_error(xp, c, ref) -> float:
    """Relative Frobenius error in float64; NaN (or Inf) never passes."""
    diff = float(xp.linalg.norm((c - ref).astype(xp.float64)))
    scale = float(xp.linalg.norm(ref.astype(xp.float64)))
    err = diff / scale if scale > 0 else diff
    return err if err == err and err != float("inf") else float("inf")

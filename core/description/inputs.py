"""What the timed runs multiply: the distribution A and B are drawn from.

A tensor-core GEMM at the card's power limit runs at the clock its power allows, and the power it
draws depends on how many bits flip in the multipliers, so on the data: on an H200 cuBLAS's FP16
GEMM at 8192^3 reads 6-8 % faster over inputs uniform in [0, 1) (one sign) than over [-1, 1)
(docs/notes/benchmarks-log.md, twelfth session). A repository's runner that fills its matrices with curand's or
torch.rand's [0, 1) is matched only when gemmwatch times the same kind of data.

The check never uses these: it always multiplies signed inputs (SIGNED), where a wrong element
stands out, whereas over inputs of one sign every element of C is near K/4 and a kernel that drops
a k-slab is off by a fraction of a percent, under FP16's tolerance. The timed runs multiply the
distribution chosen, in the same buffers (a launcher that cached their addresses is still right).

CUTLASS's examples and profiler fill their matrices with small integers (uniform over -8..8 for 16-
and 32-bit types, -2..2 for 8-bit ones): mantissas mostly zero, fewer bits flipping, a higher clock
at the power limit (example 48's TF32 GEMM on an H200: docs/BENCHMARKS.md, issue 50).
"""

from typing import Literal, get_args

Inputs = Literal["uniform(-1,1)", "uniform(0,1)", "normal(0,1)", "integers(-8,8)", "integers(-2,2)"]
SIGNED: Inputs = "uniform(-1,1)"
DESCRIPTION = ('what the timed runs multiply, to match the data of the runner this kernel is timed by at home: '
               '"uniform(-1,1)" (the default; also what every check multiplies), "uniform(0,1)" (curand\'s '
               'uniform, torch.rand), "normal(0,1)" (torch.randn), "integers(-8,8)" and "integers(-2,2)" '
               "(CUTLASS's examples and profiler, for 16/32-bit and 8-bit inputs); a card at its power limit "
               "clocks by the data it multiplies, 6-8 % apart between these")


def drawn(rng, rows: int, cols: int, inputs: str, dtype):
    """rows x cols values of `inputs` from a NumPy or CuPy Generator, in `dtype`."""
    if inputs == "uniform(-1,1)":
        return rng.random((rows, cols), dtype=dtype) * 2 - 1
    if inputs == "uniform(0,1)":
        return rng.random((rows, cols), dtype=dtype)
    if inputs == "normal(0,1)":
        return rng.standard_normal((rows, cols), dtype=dtype)
    if inputs in ("integers(-8,8)", "integers(-2,2)"):
        bound = int(inputs[len("integers(-"):].split(",")[0])
        return rng.integers(-bound, bound + 1, size=(rows, cols)).astype(dtype)
    raise ValueError(f"no input distribution {inputs!r}: one of {', '.join(get_args(Inputs))}")

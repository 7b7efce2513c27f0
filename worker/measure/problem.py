"""One case's matrices on the device (`Problem`): its inputs drawn and rounded to the kernel's
precision, laid out as its form says, and the kernel's and cuBLAS's calls over them. Made by the
runner (worker/measure/runner.py) for a case, and by a confirmation for each of its sides (worker/measure/ab.py)."""

from contextlib import contextmanager

from core.description.gemm_form import GemmForm
from core.description.inputs import SIGNED
from core.description.kernel import Launch
from core.description.precision import Precision
from worker.arguments import block_scales, half_arrays, kernel_args, tensor_maps
from worker.measure.cases import Case

FP32 = Precision("fp32")


class Problem:
    """One case's matrices on the device, in the kernel's precision and laid out as its form says.

    A and B are drawn in FP32 and rounded to the input type once: the kernel and cuBLAS get the
    rounded matrices, and the reference multiplies the same rounded values in FP32 or better, so
    the check sees the kernel's arithmetic, not the rounding of its inputs. A batch of matrices is
    one array of shape (batch, rows, cols), each matrix packed in its operand's layout, one after
    the other (the batch stride: rows x cols)."""

    def __init__(self, device, case: Case, form: GemmForm = GemmForm(), precision: Precision = FP32):
        self.device, self.m, self.n, self.k, self.form = device, case.m, case.n, case.k, form
        self.batch = case.batch
        self.precision, self.seed = precision, case.seed
        xp = device.xp
        # Row-major, in the input type: what cuBLAS multiplies.
        self.a_stored, self.b_stored = self.operands(SIGNED, case.seed)
        # Their values in FP32: what the reference multiplies (FP8: the stored numbers times the
        # per-tensor scale, or each block's, powers of two, so exact).
        self.a, self.b = (half_arrays.as_float32(xp, x) for x in (self.a_stored, self.b_stored))
        # FP8's block scales, the kernel's scale_A and scale_B ({} for every other precision).
        self.scales = block_scales.draw(device, precision, self.m, self.n, self.k, case.seed) \
            if precision.block_scaled else {}
        if self.scales:
            self.a, self.b = block_scales.applied(xp, self.a, self.b, self.scales, precision)
        elif precision.tensor_scale != 1.0:
            self.a, self.b = self.a * xp.float32(precision.tensor_scale), self.b * xp.float32(precision.tensor_scale)
        self.a_in, self.b_in = self.laid(self.a_stored, form.a), self.laid(self.b_stored, form.b)

    def operands(self, inputs: str, seed: int):
        """A and B drawn from `inputs` (core/description/inputs.py), scaled and rounded to the input type, row-major."""
        device, xp = self.device, self.device.xp
        scale = self.precision.input_scale(self.k) / self.precision.storage_scale
        a32 = device.uniform(seed, self.batch * self.m, self.k, inputs)  # a batch of 1: the matrices as ever
        b32 = device.uniform(seed + 2, self.batch * self.k, self.n, inputs)
        if self.batch > 1:
            a32, b32 = a32.reshape(self.batch, self.m, self.k), b32.reshape(self.batch, self.k, self.n)
        if scale != 1.0:
            a32, b32 = a32 * xp.float32(scale), b32 * xp.float32(scale)
        return (half_arrays.rounded(xp, a32, self.precision.input_type),
                half_arrays.rounded(xp, b32, self.precision.input_type))

    @contextmanager
    def timed_inputs(self, inputs: str | None):
        """A and B hold `inputs` while the block runs, in the same buffers (a launcher that kept
        their addresses still reads them), and the checked values again after it, so a check
        after the timing multiplies what the reference did. The signed inputs: nothing to do."""
        if inputs in (None, SIGNED):
            yield
            return
        a, b = self.operands(inputs, self.seed + 4)
        # Each operand row-major (cuBLAS's) and as its layout lays it (the kernel's), where those are
        # two arrays; an assignment copies by index, whatever the buffer's memory order.
        buffers = [(self.a_stored, a), (self.b_stored, b)]
        buffers += [(laid, values) for laid, stored, values in ((self.a_in, self.a_stored, a), (self.b_in, self.b_stored, b))
                    if laid is not stored]
        kept = [(buffer, buffer.copy()) for buffer, _ in buffers]
        try:
            for buffer, values in buffers:
                buffer[...] = values
            yield
        finally:
            for buffer, checked in kept:
                buffer[...] = checked

    def laid(self, x, layout: str):
        """x in `layout`: each matrix of a batch on its own (a batch is never interleaved)."""
        if x.ndim == 2:
            return self.device.in_layout(x, layout)
        xp = self.device.xp
        return xp.ascontiguousarray(x) if layout == "row" else xp.ascontiguousarray(x.swapaxes(1, 2)).swapaxes(1, 2)

    def new_c(self, fill: float | None = None, seed: int | None = None):
        """A C of the output type in the form's layout, filled with `fill`, uniform values from
        `seed`, or left as it comes."""
        layout = self.form.c
        if self.batch == 1:
            c = self.device.matrix(self.m, self.n, layout, fill=fill, seed=seed)
        else:
            c = self.laid(self.device.matrix(self.batch * self.m, self.n, "row", fill=fill, seed=seed)
                          .reshape(self.batch, self.m, self.n), layout)
        if self.precision.output_type == "float32":
            return c
        return self.laid(half_arrays.rounded(self.device.xp, c, self.precision.output_type), layout)

    @property
    def c(self):
        """The case's one C for the kernel: every call of the kernel, checked or timed, writes this
        same matrix (refilled in place between checks), as a home runner's calls do."""
        if getattr(self, "_c", None) is None:
            self._c = self.new_c()
        return self._c

    def refill(self, c, fill: float | None = None, seed: int | None = None) -> None:
        """C's elements, in place, as new_c would make them: its address stays."""
        c[...] = self.new_c(fill=fill, seed=seed)

    def read(self, c):
        """C's values in FP32, whatever its type."""
        return half_arrays.as_float32(self.device.xp, c)

    def cublas_call(self, out=None):
        """cuBLAS over these inputs in the kernel's precision and form (its layouts, FP16 sums, a
        strided batch), into C (a new one of the output type unless given)."""
        out = self.new_c() if out is None else out
        return self.device.cublas_call(self.a_in, self.b_in, out, self.precision, self.form, self.batch, self.scales)

    def kernel_call(self, function, launch: Launch, c, alpha: float, beta: float):
        refused = tensor_maps.unreadable(launch, self.m, self.n, self.k, kernel_args.maps_by_value(function.plan))
        if refused:
            raise ValueError(refused)
        # FP8: the kernel multiplies the stored numbers; per-tensor scales reach it folded into alpha,
        # block scales as its scale_A and scale_B.
        alpha *= self.precision.tensor_scale**2
        # A workspace ("zeros(int32, ...)", a split-K kernel's locks): the case's own buffer, handed to the kernel
        # among its buffers beside the block scales, zeroed before each call in its time, as the wrapper's
        # torch.zeros at home. Made once per case: the call below is what a timing loop repeats.
        spaces = kernel_args.workspaces(launch, self.m, self.n, self.k, self.batch, c)
        call = self.device.kernel_call(function, launch, self.m, self.n, self.k, self.a_in, self.b_in, c, alpha, beta,
                                       self.batch, {**self.scales, **spaces})
        for workspace in spaces.values():
            call = self.device.zeroed_first(call, workspace)
        # A kernel that adds into C: zeroed first, as its own caller's torch.zeros, in the same time.
        return self.device.zeroed_first(call, c) if launch.c_starts_zero else call

"""A repository's Python wrapper (`matmul(a, b)`) read for the one Triton launch it makes, in the confined
compile process (worker/compile/triton_sandbox.py loads this file by path, as it loads triton_module.py).

A wrapper is how a repository calls its kernel: it reads the sizes off its tensors, allocates C, and
launches `kernel[grid](a, b, c, M, N, K, a.stride(0), ...)`. gemmwatch times the kernel, not the
wrapper: so the wrapper is called once here, with stand-ins for tensors whose sizes are names (M, N, K,
lda ...) rather than numbers, and the launch is recorded instead of made. What it passed says which
parameter is which matrix, size or stride, which tl.constexpr values it chose, and its grid as an
expression of the sizes and the configuration's values: the description of the kernel a user would
otherwise write by hand (core/description/kernel_description.py `with_wrapper_call`), which the runner then
compiles, checks and times like any Triton kernel. Standard library and Triton only; torch is never
loaded: the wrapper meets a stand-in for the few calls a wrapper makes (`torch.empty`, the dtypes,
the device's SM count). The Triton code Helion generates is read the same way: its wrapper launches
through `_launcher`, whose default a stand-in for `helion.runtime` supplies (`helion_modules`).
"""

import builtins
import math
import types


class Unsupported(Exception):
    """What the wrapper did that cannot be read as one launch, in the job's terms."""


class Sym:
    """A size the wrapper computes with, kept as the expression gemmwatch's grid language reads."""

    def __init__(self, text: str, atom: bool = True):
        self.text, self.atom = text, atom

    def __repr__(self) -> str:
        return self.text

    @staticmethod
    def of(value) -> str:
        if isinstance(value, Sym):
            return value.text if value.atom else f"({value.text})"
        if isinstance(value, bool) or not isinstance(value, int):
            raise Unsupported(f"the wrapper computes a size with {value!r}, which is not an integer")
        return str(value)

    def _op(self, other, op: str, reflected: bool = False) -> "Sym":
        left, right = (other, self) if reflected else (self, other)
        return Sym(f"{Sym.of(left)} {op} {Sym.of(right)}", atom=False)

    def __add__(self, other): return self._op(other, "+")  # noqa: E704
    def __radd__(self, other): return self._op(other, "+", True)  # noqa: E704
    def __sub__(self, other): return self._op(other, "-")  # noqa: E704
    def __rsub__(self, other): return self._op(other, "-", True)  # noqa: E704
    def __mul__(self, other): return self._op(other, "*")  # noqa: E704
    def __rmul__(self, other): return self._op(other, "*", True)  # noqa: E704
    def __floordiv__(self, other): return self._op(other, "//")  # noqa: E704
    def __rfloordiv__(self, other): return self._op(other, "//", True)  # noqa: E704

    def __eq__(self, other) -> bool:  # an assert that two sizes agree (a.shape[1] == b.shape[0])
        return isinstance(other, Sym) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def _as_number(self, *_):
        raise Unsupported(f"the wrapper uses the size {self.text} as a number (converts it or computes with it "
                          "past + - * //), which gemmwatch cannot read off one call: describe the kernel with "
                          "entry, args and grid instead")

    __int__ = __index__ = __float__ = __mod__ = __truediv__ = _as_number

    # A comparison has no answer for sizes that are names: each outcome is tried in turn (capture), and
    # the wrapper is read only where every outcome makes the same launch.
    def __lt__(self, other): return _Branches.current.decide(f"{Sym.of(self)} < {Sym.of(other)}")  # noqa: E704
    def __le__(self, other): return _Branches.current.decide(f"{Sym.of(self)} <= {Sym.of(other)}")  # noqa: E704
    def __gt__(self, other): return _Branches.current.decide(f"{Sym.of(self)} > {Sym.of(other)}")  # noqa: E704
    def __ge__(self, other): return _Branches.current.decide(f"{Sym.of(self)} >= {Sym.of(other)}")  # noqa: E704
    def __bool__(self): return _Branches.current.decide(f"{Sym.of(self)} != 0")  # noqa: E704


class _Branches:
    """The outcomes one call of the wrapper takes at its comparisons of sizes: those of `plan` first, then
    True at each comparison past it. triton-lang/kernels' wrapper copies an input that is strided both ways
    (`if a.stride(0) > 1 and a.stride(1) > 1: a = a.contiguous()`): lda > 1 has no answer, and either
    way the launch is the same."""

    LIMIT = 6  # comparisons in one call: at most 2**6 calls in all
    current: "_Branches"

    def __init__(self, plan: list[bool]):
        self.plan, self.taken, self.asked = plan, [], []

    def decide(self, question: str) -> bool:
        if len(self.taken) == self.LIMIT:
            raise Unsupported(f"the wrapper compares its sizes more than {self.LIMIT} times in one call "
                              f"({', '.join(self.asked)}, ...): describe the kernel with entry, args and grid instead")
        outcome = self.plan[len(self.taken)] if len(self.taken) < len(self.plan) else True
        self.taken.append(outcome)
        self.asked.append(question)
        return outcome

    def said(self) -> str:
        return ", ".join(f"{question} taken as {outcome}" for question, outcome in zip(self.asked, self.taken))

    def others(self) -> list[list[bool]]:
        """The plans that take the other outcome at each comparison this call met past its own plan."""
        return [self.taken[:i] + [not self.taken[i]] for i in range(len(self.plan), len(self.taken))]


_Branches.current = _Branches([])


def _extreme(name: str):
    plain = getattr(builtins, name)

    def pick(*values):
        if len(values) == 1:
            values = tuple(values[0])
        if any(isinstance(v, Sym) for v in values):
            return Sym(f"{name}({', '.join(Sym.of(v) for v in values)})")
        return plain(*values)

    return pick


class Tensor:
    """A matrix the wrapper is given or makes: its sizes and strides as names, its type by name."""

    def __init__(self, role: str, shape: tuple, strides: tuple, dtype: str, zeroed: bool = False):
        self.role, self.shape, self._strides, self.dtype = role, shape, strides, dtype
        self.device = "cuda"
        self.ndim = len(shape)
        self.zeroed = zeroed  # made by torch.zeros: the kernel may add into it

    def stride(self, dim: int | None = None):
        return self._strides if dim is None else self._strides[dim]

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def is_contiguous(self) -> bool:
        return self._strides[-1] == 1

    @property
    def is_cuda(self) -> bool:  # a wrapper's `assert a.is_cuda`
        return True

    def element_size(self) -> int:
        return {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}.get(self.dtype, 4)

    @property
    def T(self) -> "Tensor":  # noqa: N802 (torch's name)
        return Tensor(self.role, tuple(reversed(self.shape)), tuple(reversed(self._strides)), self.dtype)

    def __getattr__(self, name):
        raise Unsupported(f"the wrapper reads tensor.{name}, which gemmwatch's stand-in for a tensor does not "
                          "offer (shape, stride, size, dtype, device, is_cuda, T, is_contiguous)")


class _Properties:
    multi_processor_count = Sym("SM_COUNT")


class _Cuda:
    @staticmethod
    def get_device_properties(*_args):
        return _Properties()

    @staticmethod
    def current_device():
        return 0


class _Context:
    """The ctx an autograd.Function's forward is given: it keeps what forward saves or sets on it."""

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *_tensors) -> None:
        pass

    def set_materialize_grads(self, _value) -> None:
        pass


class _Function:
    """torch.autograd.Function as a wrapper built on one meets it (triton-lang/kernels' `matmul =
    _matmul.apply`): `apply` runs its forward, as a call under no_grad does; nothing runs backward."""

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = _Context()
        if "setup_context" in vars(cls):  # the newer form: forward without ctx, then setup_context
            out = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, out)
            return out
        return cls.forward(ctx, *args, **kwargs)


class _Autograd:
    Function = _Function


class Torch:
    """torch as a wrapper meets it here: its dtypes by name, C's allocation, the device's SM count,
    autograd.Function, and the names its type hints use (torch.Tensor, torch.dtype)."""

    float32, float16, bfloat16, float8_e4m3fn = "float32", "float16", "bfloat16", "float8_e4m3fn"
    # Types a wrapper lists beside those (triton-lang/kernels' `[torch.int8, torch.float16, ...]`).
    float64, float8_e5m2, int8, int16, int32, int64, uint8, uint32 = ("float64", "float8_e5m2", "int8", "int16",
                                                                      "int32", "int64", "uint8", "uint32")
    cuda = _Cuda()
    autograd = _Autograd
    Tensor = Tensor
    dtype = str

    def __init__(self, made: list):
        self._made = made

    @staticmethod
    def device(*_args, **_kwargs):
        return "cuda"

    def empty(self, *shape, device=None, dtype=None, zeroed: bool = False, **_kwargs):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if len(shape) not in (1, 2):
            raise Unsupported(f"the wrapper allocates a tensor of {len(shape)} dimensions; gemmwatch reads a "
                              "wrapper that makes one M x N matrix, C, and workspaces beside it")
        rows, cols = shape if len(shape) == 2 else (shape[0], 1)
        # C, if it is the one returned (else a workspace: _capture_once). Packed: its leading dimension is its
        # width, a name where the sizes are names.
        made = Tensor("C", tuple(shape), (Sym("ldc") if isinstance(cols, Sym) else cols, 1)[-len(shape):],
                      dtype or "float32", zeroed)
        self._made.append(made)
        return made

    def zeros(self, *shape, **kwargs):
        """C starting at zero: a kernel that adds its pieces into C (split-K) relies on it, so the launch
        read off this wrapper has C zeroed before each call, as here."""
        return self.empty(*shape, zeroed=True, **kwargs)

    @staticmethod
    def promote_types(first: str, second: str) -> str:
        """The wider of two types, as torch promotes them (for C's type: both are A's and B's)."""
        order = ("float8_e4m3fn", "float16", "bfloat16", "float32")
        if first == second:
            return first
        if {first, second} == {"float16", "bfloat16"}:
            return "float32"
        return max(first, second, key=lambda name: order.index(name) if name in order else len(order))

    def empty_like(self, other, dtype=None, **_kwargs):
        return self.empty(other.shape, dtype=dtype or other.dtype)

    def __getattr__(self, name):
        raise Unsupported(f"the wrapper calls torch.{name}, which gemmwatch's stand-in for torch does not offer "
                          "(empty, zeros, empty_like, the dtypes, cuda.get_device_properties, autograd.Function)")


def helion_modules() -> dict[str, types.ModuleType]:
    """`helion` and `helion.runtime` as the Triton code Helion generates imports them (`from helion.runtime
    import default_launcher as _default_launcher`, the wrapper's `_launcher=` default): a launcher that
    launches as `kernel[grid](*args, **options)` does, which is how Helion's own launches (triton's run
    with that grid), so the launch is read like any other. Nothing else of Helion is offered: the file is
    its output, not Helion itself, which imports torch and is never loaded here."""
    def default_launcher(kernel, grid, *args, **options):
        return kernel[grid](*args, **options)

    runtime = types.ModuleType("helion.runtime")
    runtime.default_launcher = default_launcher
    package = types.ModuleType("helion")
    package.__path__ = []  # a package, so that `helion.runtime` is found in sys.modules under it
    package.runtime = runtime
    # What its wrapper computes a block size with (split-K's `helion.next_power_of_2(helion.cdiv(k, split_k))`).
    package.cdiv = _helion_cdiv
    package.next_power_of_2 = _next_power_of_2
    return {"helion": package, "helion.runtime": runtime}


def _helion_cdiv(a, b):
    if isinstance(a, Sym) or isinstance(b, Sym):
        return Sym(f"cdiv({Sym.of(a)}, {Sym.of(b)})")
    return -(-a // b)


def _next_power_of_2(n):
    if isinstance(n, Sym):
        n._as_number()  # a size used as a number: said so
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def matrices(layout: dict, input_type: str, dims: list | None = None) -> tuple[Tensor, Tensor]:
    """A (M x K) and B (K x N) as the description's layout lays them (packed: a row-major A's first stride
    is its leading dimension, lda). dims: the sizes as numbers (a file written for one size, Helion's),
    else names."""
    def made(role, rows, cols, row_major):
        lead = Sym(f"ld{role.lower()}") if dims is None else cols if row_major else rows
        return Tensor(role, (rows, cols), (lead, 1) if row_major else (1, lead), input_type)

    m, n, k = (Sym("M"), Sym("N"), Sym("K")) if dims is None else tuple(dims)
    return made("A", m, k, layout.get("A", "row") == "row"), made("B", k, n, layout.get("B", "row") == "row")


def capture(module, plan: dict, triton, kernel_and_configs, layout: dict, input_type: str,
            dims: list | None = None) -> dict:
    """The one launch the wrapper's call makes (plan: core/description/wrapper_call.py's, `matmul(a, b)` or the
    call as the description writes it), as a description reads it: {"entry", "args", "defines", "grid",
    "triton", "c_starts_zero", "c_type"}; Unsupported where it cannot be read so. dims: the one size the file
    was written for (Helion's code for a case), its sizes then numbers."""
    if not callable(_named(module, plan["callee"])):
        raise Unsupported(f"{'.'.join(plan['callee'])} is not a function of the file")
    wrapper = plan["shown"]
    # Called once per outcome of its comparisons of sizes (_Branches): one launch for all, or refused.
    read, plans = [], [[]]
    while plans:
        _Branches.current = branches = _Branches(plans.pop())
        try:
            described = _capture_once(module, plan, triton, kernel_and_configs, layout, input_type, dims)
        except Unsupported as exc:
            raise Unsupported(f"{exc} (where {branches.said()})" if branches.asked else str(exc)) from None
        except Exception as exc:  # the wrapper's own error (its NotImplementedError): on which outcomes it came
            if branches.asked:
                exc.add_note(f"(where {branches.said()})")
            raise
        finally:
            _Branches.current = _Branches([])
        read.append((branches, described))
        plans += branches.others()
    first_branches, first = read[0]
    for branches, described in read[1:]:
        if described != first:
            raise Unsupported(f"the launch {wrapper} makes depends on its sizes: where {first_branches.said()} "
                              f"it differs from where {branches.said()}; gemmwatch reads a wrapper that makes one "
                              "launch for every size (describe the kernel with entry, args and grid instead)")
    return first


def _named(module, dotted: list[str]):
    """A name of the wrapper's file (`group_m_matmul`, `torch.float16`, `tl.float32`), as its code would
    reach it; Unsupported where the file has no such name."""
    if dotted[0] not in module.__dict__:
        raise Unsupported(f"{dotted[0]} is not a name of the file")
    found = module.__dict__[dotted[0]]
    for depth, part in enumerate(dotted[1:], start=1):
        if part.startswith("__"):  # the plan refuses these too: no way out through a dunder
            raise Unsupported(f"{'.'.join(dotted)}: a name with a double underscore is not followed")
        try:
            found = getattr(found, part)
        except AttributeError:
            raise Unsupported(f"{'.'.join(dotted[:depth])} has no {part}") from None
    return found


def _given(module, value: dict, a: Tensor, b: Tensor):
    """One argument of the call as the plan writes it: a literal, a name of the file, or a stand-in matrix."""
    if "matrix" in value:
        return a if value["matrix"] == "a" else b
    if "literal" in value:
        return value["literal"]
    if "name" in value:
        return _named(module, value["name"])
    items = [_given(module, item, a, b) for item in value.get("tuple", value.get("list", []))]
    return tuple(items) if "tuple" in value else items


def _called(module, plan: dict, a: Tensor, b: Tensor):
    """The wrapper's call, made as the description writes it (`matmul(mode="group_m")(a, b)` is two calls)."""
    target = _named(module, plan["callee"])
    for call in plan["calls"]:
        target = target(*(_given(module, value, a, b) for value in call["args"]),
                        **{name: _given(module, value, a, b) for name, value in call["kwargs"].items()})
    return target


def _capture_once(module, plan: dict, triton, kernel_and_configs, layout: dict, input_type: str,
                  dims: list | None) -> dict:
    """One call of the wrapper on stand-ins, its launch recorded instead of made (capture)."""
    wrapper = plan["shown"]
    made: list[Tensor] = []
    launches: list[tuple] = []
    interface = triton.runtime.jit.KernelInterface

    def recorded(self, grid):
        return lambda *args, **kwargs: launches.append((self, grid, args, kwargs))

    saved = {name: module.__dict__.get(name) for name in ("torch", "min", "max")}
    original = interface.__getitem__
    # The file's `import torch` was refused (triton_module.NOT_LOADED): the stand-in, this call's own.
    if module.__dict__.get("torch") is None or isinstance(module.__dict__["torch"], Torch):
        module.torch = Torch(made)
    module.min, module.max = _extreme("min"), _extreme("max")
    interface.__getitem__ = recorded
    try:
        a, b = matrices(layout, input_type, dims)
        returned = _called(module, plan, a, b)
        if len(launches) != 1:
            raise Unsupported(f"{wrapper} made {len(launches)} Triton launches; gemmwatch reads a wrapper "
                              "that launches one @triton.jit kernel (describe each kernel with entry, args and grid)")
        kernel_object, grid, args, kwargs = launches[0]
        kernel, configs = kernel_and_configs(triton, kernel_object)
        if kernel is None:
            raise Unsupported(f"{wrapper} launches something that is not a @triton.jit function")
        if not (isinstance(returned, Tensor) and returned.role == "C" and returned.ndim == 2):
            raise Unsupported(f"{wrapper} does not return the C it allocated; gemmwatch reads a wrapper "
                              "that returns C = A·B")
        for other in made:  # what else it made is a workspace: its locks, its partial sums
            if other is not returned:
                other.role = _workspace(other)
        described = _described(kernel, configs, grid, args, kwargs, triton.language)  # its grid evaluated with the stand-ins in place
        if returned.zeroed:
            described["c_starts_zero"] = True
        if isinstance(returned.dtype, str):
            described["c_type"] = returned.dtype  # torch's name: the description's output is checked against it
        return described
    finally:
        interface.__getitem__ = original
        for name, value in saved.items():
            if value is None:
                module.__dict__.pop(name, None)
            else:
                module.__dict__[name] = value


_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
# The types a workspace may hold, as torch names them (core/description/description_fields.py WORKSPACE_TYPES).
_WORKSPACE_TYPES = ("int8", "uint8", "int32", "uint32", "int64", "float16", "bfloat16", "float32")


def _workspace(tensor: Tensor) -> str:
    """A tensor the wrapper made beside C, as the description's workspace arg: "zeros(int32, cdiv(M, 128))"."""
    if not tensor.zeroed:
        raise Unsupported("the wrapper makes a tensor beside C with torch.empty; gemmwatch hands a kernel a workspace "
                          "it zeroes before each call, as torch.zeros makes one (describe the kernel by hand)")
    if tensor.dtype not in _WORKSPACE_TYPES:
        raise Unsupported(f"the wrapper makes a workspace of {tensor.dtype}; gemmwatch's are of "
                          f"{', '.join(_WORKSPACE_TYPES)}")
    count = tensor.shape[0] if len(tensor.shape) == 1 else tensor.shape[0] * tensor.shape[1]
    return f"zeros({tensor.dtype}, {Sym.of(count)})"


def _described(kernel, configs, grid, args, kwargs, language) -> dict:
    params = list(kernel.params)
    if len(args) > len(params):
        raise Unsupported(f"{kernel.__name__} takes {len(params)} parameters; the wrapper passed {len(args)}")
    roles, defines, words, as_passed = [], {}, {}, {}

    def constant(name: str, value) -> None:
        """A word, a Triton type (spelt "tl.float32") or None goes with the words; the rest is a define."""
        spelled = _type_spelling(language, value)
        if value is None or isinstance(value, str) or spelled:
            words[name], as_passed[name] = spelled or value, value
        else:
            defines[name] = _define(name, value)

    for param, value in zip(params, args):
        if param.is_constexpr:
            constant(param.name, value)
        else:
            roles.append(_role(param.name, value))
    options = {}
    for name, value in kwargs.items():
        if name in _OPTIONS:
            options[name] = value
        elif name in {p.name for p in params if p.is_constexpr}:
            constant(name, value)
        else:
            raise Unsupported(f"the wrapper passes {name}= to {kernel.__name__}, which is no tl.constexpr of it")
    plain = [p.name for p in params if not p.is_constexpr]
    if len(roles) != len(plain):
        raise Unsupported(f"the wrapper passes {len(roles)} of {kernel.__name__}'s {len(plain)} parameters that are "
                          "not tl.constexpr positionally; gemmwatch reads those in order")
    if callable(grid):
        names = {p.name: Sym(p.name) for p in params if p.is_constexpr}
        for config in configs:
            names.update({k: Sym(k) for k in config.kwargs})
        grid = grid({**names, **{k: (Sym(v) if isinstance(v, str) else v) for k, v in defines.items()}, **as_passed})
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    if not 1 <= len(grid) <= 3:
        raise Unsupported(f"the wrapper's grid has {len(grid)} dimensions")
    texts = [Sym.of(g) for g in grid] + ["1"] * (3 - len(grid))
    triton_options = {k: v for k, v in options.items() if k in ("num_warps", "num_stages")}
    if words:  # ACTIVATION="", acc_dtype=tl.float32: compiled in as such (the description's pattern checks it)
        triton_options["string_constexprs"] = words
    return {"entry": kernel.__name__, "args": roles, "defines": defines,
            "grid": dict(zip(("x", "y", "z"), texts)), "triton": triton_options or None}


def _type_spelling(language, value) -> str | None:
    """A Triton type as the file spells it and a description gives it ("tl.float32"); None for anything else."""
    if not isinstance(value, language.dtype):
        return None
    return next((f"tl.{name}" for name, known in vars(language).items()
                 if not name.startswith("_") and isinstance(known, language.dtype) and known == value), None)


def _role(name: str, value) -> str:
    if isinstance(value, Tensor):
        return value.role
    if isinstance(value, Sym):
        if value.atom:
            return value.text
        raise Unsupported(f"the wrapper passes {value.text} as {name}; gemmwatch passes sizes and leading "
                          "dimensions as they are (M, N, K, lda, ldb, ldc)")
    if isinstance(value, int) and not isinstance(value, bool):
        return f"={value}"
    if isinstance(value, float) and math.isfinite(value):  # a scale of 1.0, passed as Triton passes it: an fp32
        return f"={value!r}"
    raise Unsupported(f"the wrapper passes {value!r} as {name}, which is neither a matrix, a size nor a number")


def _define(name: str, value):
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, Sym) and value.atom and value.text == "SM_COUNT":
        return "SM_COUNT"
    if isinstance(value, Sym):
        raise Unsupported(f"the wrapper sets tl.constexpr {name} from the sizes ({value.text}): a constexpr is "
                          "compiled in, gemmwatch compiles a kernel per description, not per size")
    raise Unsupported(f"the wrapper sets tl.constexpr {name} to {value!r}; gemmwatch takes integer constexprs "
                      "(and the device's SM count), words, Triton types and None")

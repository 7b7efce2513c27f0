"""A Triton file's definitions without its script: how the confined compile process (and
scripts/studies/triton_do_bench.py, which times the same kernel with Triton's own tool) loads a
repository's Python as it is.

A tutorial or a repository's kernel file is often a script as well: it builds tensors on the GPU,
checks its kernel against torch and runs a benchmark at module level. Importing it whole would run
all that (minutes, on a GPU the compile process must not touch). So only what defines things is
run, statement by statement in the file's order: imports, functions and classes (with their
decorators: `@triton.autotune(configs=...)` is evaluated), assignments, and `try` blocks made of
those. Loops, bare expressions (`benchmark.run(...)`), `if`/`with` blocks (`if __name__ ==
"__main__":`) are skipped. A statement that raises is skipped with its error kept: a module-level
`a = torch.randn(..., device="cuda")` fails without a GPU and is no loss unless the kernel needs it.

Triton's active driver is replaced first by one that answers the questions a file asks as it is
defined (which backend, which target, which torch device) for the worker's GPU, and refuses the
rest (nothing is launched here). Only the standard library and Triton are imported.
"""

import __future__
import ast
import importlib.abc
import importlib.util
import os
import sys
import types

# Frameworks that are never loaded where a file is read: nothing runs on a GPU there, and torch's
# import half-succeeds in a confined process (it cannot open /dev/urandom) and can then crash it.
# A file imports them for its wrapper and script, not to define its kernel.
# Helion too: it imports torch, and its generated code needs only its launcher, which a wrapper's
# reading stands in for (worker/compile/triton_wrapper.py).
NOT_LOADED = ("torch", "cupy", "cupyx", "jax", "tensorflow", "paddle", "helion")

DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
               ast.AnnAssign, ast.AugAssign)


class AheadOfTimeDriver:
    """Triton's driver as a file sees it while it is defined here: the worker's target, no GPU."""

    def __init__(self, target):
        self.target = target
        self.backend = target.backend

    def get_current_target(self):
        return self.target

    def get_active_torch_device(self):
        try:
            import torch
        except ImportError:
            return "cuda"
        return torch.device("cuda")  # a name only: no CUDA context is made

    def is_active(self) -> bool:
        return True

    def get_benchmarker(self):  # some releases ask for it as @triton.autotune is applied
        def refuse(*args, **kwargs):
            raise RuntimeError("gemmwatch times the kernel itself: nothing is benchmarked while the file is read")

        return refuse

    def __getattr__(self, name):
        raise RuntimeError(f"gemmwatch compiles this file ahead of time, without a GPU: Triton's driver.{name} "
                           "is not available while the file's definitions are read")


class _NotLoaded:
    """A meta path finder that refuses NOT_LOADED by name, with the reason."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in NOT_LOADED:
            raise ImportError(f"{name} is not loaded where gemmwatch reads a Triton file (no GPU work runs there; "
                              "gemmwatch passes the kernel its buffers itself)", name=name)
        return None


def refuse_frameworks() -> None:
    """From now on in this process, importing a NOT_LOADED framework raises ImportError."""
    if not any(isinstance(f, _NotLoaded) for f in sys.meta_path):
        sys.meta_path.insert(0, _NotLoaded())


def runs(statement: ast.stmt) -> bool:
    """Whether a module-level statement defines something (and is run) or is script (and skipped)."""
    if isinstance(statement, ast.Try):
        return all(runs(s) for s in statement.body)
    return isinstance(statement, DEFINITIONS)


def load(path: str, name: str = "gemmwatch_job_kernel", preset: dict | None = None,
         root: str | None = None) -> tuple[types.ModuleType, list[str]]:
    """The module of `path` with its definitions run and its script skipped; with what raised,
    one line each ("line 12: NameError: ..."). A file that does not parse is a SyntaxError.
    `preset`: names the module holds before its first statement (a stand-in for torch, which its
    refused `import torch` leaves in place, so that `def matmul(a: torch.Tensor)` is still defined).
    `root`: the folder of the job's files, `path` among them: its imports of its sibling files then
    resolve as in its repository (JobFiles), and what raised in those files is listed too."""
    module = types.ModuleType(name)
    module.__dict__.update(preset or {})
    module.__file__ = path
    sys.modules[name] = module  # Triton and dataclasses look a function's module up by name
    siblings = None
    if root is not None:
        siblings = JobFiles(root, os.path.dirname(os.path.relpath(path, root)), preset or {})
        # After Python's own finders: a job's file named like a module of the standard library that
        # Triton imports later cannot stand in for it.
        sys.meta_path.append(siblings)
        module.__package__ = siblings.package_of(os.path.relpath(path, root))  # for `from .x import y`
    failed = run_definitions(path, module, preset or {})
    return module, failed + (siblings.failed if siblings else [])


def run_definitions(path: str, module: types.ModuleType, preset: dict) -> list[str]:
    """Run the file's definitions into `module`, statement by statement; what raised, one line each."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    failed = []
    # Each statement is compiled on its own, so the file's `from __future__ import annotations` must be
    # passed on to every one (as Helion's generated code needs: its hints name types it never imports).
    features = 0
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            features |= sum(getattr(__future__, alias.name).compiler_flag for alias in statement.names
                            if hasattr(__future__, alias.name))
    for statement in tree.body:
        if not runs(statement):
            continue
        code = compile(ast.Module(body=[statement], type_ignores=[]), path, "exec", flags=features, dont_inherit=True)
        try:
            exec(code, module.__dict__)
        except Exception as exc:  # the file's own statement: kept as a note, the next one runs
            if not _from_stand_in(statement, module.__dict__, preset):
                failed.append(f"line {statement.lineno}: {type(exc).__name__}: {exc}")
    return failed


# The package the job's files are loaded under (JobFiles).
JOB_PACKAGE = "gemmwatch_job"


class JobFiles(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The job's own Python files as its kernel file imports them: triton-lang/kernels' matmul.py takes its
    perf model with `from .matmul_perf_model import ...`, a script `import helpers` from beside it. Each
    such file is loaded as `load` loads the kernel's, its definitions only (a sibling's benchmark at
    module level is not run), under a package named after its folder (JOB_PACKAGE.kernels.matmul_perf_model),
    so that relative imports resolve as in the repository; a plain name is looked for beside the kernel's
    file first, as a script's folder heads its sys.path. A folder is a package whose __init__.py is not
    run: the file is read for its kernel, not for its package (whose __init__ imports everything else)."""

    def __init__(self, root: str, top: str, preset: dict):
        self.root, self.top, self.preset = root, top, preset
        self.failed: list[str] = []  # what raised in the siblings, each line under its file

    @staticmethod
    def package_of(relative: str) -> str:
        folder = os.path.dirname(relative)
        return ".".join([JOB_PACKAGE, *[part for part in folder.split(os.sep) if part]])

    def find_spec(self, name, path=None, target=None):
        parts = name.split(".")
        if not all(part.isidentifier() for part in parts):  # importlib.import_module("/a/path") names no module
            return None
        if parts[0] == JOB_PACKAGE:
            where = os.path.join(self.root, *parts[1:])
        elif parts[0] in NOT_LOADED:
            return None
        else:
            where = os.path.join(self.root, self.top, *parts)
        if os.path.isfile(where + ".py"):
            return importlib.util.spec_from_file_location(name, where + ".py", loader=self)
        if os.path.isdir(where):
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return None  # Python's own module object

    def exec_module(self, module) -> None:
        spec = module.__spec__
        if spec.submodule_search_locations is not None:  # a folder: its modules are found by name, here
            return
        module.__dict__.update(self.preset)  # its __package__ is its folder's (spec.parent), as in Python
        relative = os.path.relpath(spec.origin, self.root)
        self.failed += [f"{relative} {line}" for line in run_definitions(spec.origin, module, self.preset)]


def _from_stand_in(statement: ast.stmt, names: dict, preset: dict) -> bool:
    """A refused `from torch import Tensor` where the file holds a stand-in for torch: each name taken
    from the stand-in instead, so that `def matmul(a: Tensor, b: Tensor)` is still defined. False
    where the statement is another, or the stand-in lacks one of its names."""
    if not (isinstance(statement, ast.ImportFrom) and statement.module in preset):
        return False
    try:
        found = {alias.asname or alias.name: getattr(preset[statement.module], alias.name) for alias in statement.names}
    except Exception:  # the stand-in's own refusal of a name it does not offer
        return False
    names.update(found)
    return True


def use_target(triton, target) -> None:
    """Make the ahead-of-time driver Triton's active one, for the worker's target."""
    triton.runtime.driver.set_active(AheadOfTimeDriver(target))


def kernel_and_configs(triton, obj):
    """The @triton.jit function behind `obj` and the configurations its @triton.autotune lists
    (empty for a plain kernel); None where `obj` is neither."""
    layers, kernel = _chain(triton, obj)
    if kernel is None:
        return None, []
    # @triton.heuristics wraps the way autotune does; the autotune nearest the kernel is the one that runs it
    return kernel, next((list(layer.configs) for layer in reversed(layers)
                         if isinstance(layer, triton.runtime.autotuner.Autotuner)), [])


def _chain(triton, obj) -> tuple[list, object]:
    """The decorator objects around `obj`'s @triton.jit function, the outermost first (@triton.autotune,
    @triton.heuristics: each holds the next as `fn`), and that function: None where the chain ends elsewhere."""
    layers = []
    while obj is not None and not isinstance(obj, triton.runtime.jit.JITFunction):
        layers.append(obj)
        inner = getattr(obj, "fn", None)
        obj = None if inner is obj else inner
    return layers, obj


def pruning_of(triton, obj) -> list[str]:
    """What the @triton.autotune around `obj`'s kernel names in prune_configs_by, as the file spells it
    ("perf_model=estimate_matmul_time", "top_k=10"); empty where it names nothing. gemmwatch does not run it (the job's
    Python, asking the GPU): every configuration is timed, and the check says so."""
    for layer in _chain(triton, obj)[0]:
        if isinstance(layer, triton.runtime.autotuner.Autotuner):
            named = [(what, getattr(layer, what, None)) for what in ("early_config_prune", "perf_model")]
            said = [f"{what}={getattr(function, '__name__', 'given')}" for what, function in named if function]
            top_k = getattr(layer, "configs_top_k", 1.0)
            every = isinstance(top_k, float) and top_k == 1.0  # Triton's default: all that are left
            return said + ([f"top_k={top_k}"] if said and not every else [])
    return []


def heuristics_of(triton, obj) -> list:
    """What the @triton.heuristics around `obj`'s kernel set, as (name, function) in the order Triton's
    launcher runs them (the outer decorator first, each dict in its order); empty where there are none."""
    return [item for layer in _chain(triton, obj)[0] if isinstance(layer, triton.runtime.autotuner.Heuristics)
            for item in layer.values.items()]


def constexpr_value(language, name: str, value):
    """A description's constant as the kernel gets it: a Triton type spelt as the file spells it
    ("tl.float32", a string_constexprs value) is that type; a word, a number or None is itself."""
    if not (isinstance(value, str) and value.startswith("tl.")):
        return value
    found = getattr(language, value[3:], None)
    if not isinstance(found, language.dtype):
        raise ValueError(f"{name} is {value}, which is no type of this Triton's triton.language "
                         "(tl.float32, tl.float16, tl.bfloat16, tl.float8e4nv, tl.int32, ...)")
    return found


def describe_config(config, plain: list[str]) -> dict:
    """A triton.Config as plain data: its constexpr values and compile options, and what its pre_hook does
    (the job's Python run before each launch: triton-lang/kernels' split-K configurations zero C with one),
    read by pre_hook_of over the kernel's plain parameters."""
    hook = pre_hook_of(config, plain)
    return {"kwargs": dict(config.kwargs), "num_warps": int(config.num_warps), "num_stages": int(config.num_stages),
            **({"pre_hook": hook} if hook is not None else {}),
            "num_ctas": int(getattr(config, "num_ctas", 1) or 1),
            "maxnreg": getattr(config, "maxnreg", None)}


class _HookUnread(Exception):
    """What a pre_hook did to an argument other than zero it."""


class _HookArgument:
    """A kernel argument as a pre_hook meets it while it is read: zeroing it (`zero_()`, `fill_(0)`) is recorded,
    and anything else it asks of the argument stops the reading, saying what."""

    def __init__(self, name: str, zeroed: list[str]):
        self._name, self._zeroed = name, zeroed

    def zero_(self):
        self._zeroed.append(self._name)
        return self

    def fill_(self, value):
        if type(value) not in (int, float) or value != 0:
            raise _HookUnread(f"it fills {self._name} with {value!r}")
        return self.zero_()

    def __getattr__(self, what: str):
        raise _HookUnread(f"it reads {self._name}.{what}")


def pre_hook_of(config, plain: list[str]) -> dict | None:
    """What a configuration's pre_hook does before each launch, read by calling it once with stand-ins for the
    kernel's arguments (_HookArgument) and the configuration's own values, as Triton's autotuner calls it with
    the launch's: {"zeroes": [positions among the plain parameters]} where all it does is zero some of them (the
    runner then zeroes those before each call, in its time), {"unread": why} otherwise, None without a hook. It
    runs here, the confined process that has already run the file's definitions, never beside a GPU."""
    hook = getattr(config, "pre_hook", None)
    if hook is None:
        return None
    zeroed: list[str] = []
    nargs = {name: _HookArgument(name, zeroed) for name in plain}
    own = config.all_kwargs() if hasattr(config, "all_kwargs") else dict(config.kwargs)
    nargs.update({name: value for name, value in own.items() if name not in nargs})
    try:
        hook(nargs)
    except BaseException as exc:  # the job's Python: whatever it raised is why it could not be read
        return {"unread": (str(exc) if isinstance(exc, _HookUnread) else f"it raised {type(exc).__name__}: {exc}")[:200]}
    if not zeroed:
        return {"unread": "it zeroes none of the kernel's arguments"}
    return {"zeroes": sorted({plain.index(name) for name in zeroed})}

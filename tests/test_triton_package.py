"""A Triton kernel file as triton-lang/kernels' kernels/matmul.py is: a module of a package that imports
its perf model relatively and its configurations by plain name, prunes with them, and takes types as
tl.constexpr values (tests/fixtures/triton_package_repo). The folder carries the files it imports, the
confined compile process resolves the imports (each file's definitions only), a type is compiled in as
a type, and what gemmwatch does not run (prune_configs_by) is said. Real Triton and the real confined
compile process; the kernel's run is the GPU's (tests/test_gpu_triton.py -k package)."""

from pathlib import Path

import pytest

from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.description.python_imports import imported_paths
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES, CpuRunner
from worker.arguments import kernel_args
from worker.compile import compiler, offline_check, triton_build
from worker.compile.compiled import CompileRefused
from worker.measure import triton_autotune
from worker.measure.cases import Case, KernelChoice, TimingPolicy

pytest.importorskip("triton")
REPO = Path(__file__).parent / "fixtures" / "triton_package_repo"


def settings(tmp_path) -> Settings:
    return Settings(GEMMWATCH_DATA_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="300")


def described(name: str = "package_matmul", **changes) -> KernelDescription:
    desc = next(d for d in load_folder(REPO) if d.name == name)
    return KernelDescription.model_validate({**desc.model_dump(mode="json", exclude_none=True), **changes})


@pytest.fixture(scope="module")
def kernel_read(tmp_path_factory):
    cfg = settings(tmp_path_factory.mktemp("read"))
    return triton_build.describe(resolve(described(), {}, H100_FIGURES, "job"), "9.0", cfg)


def test_the_folder_carries_what_the_kernel_file_imports_and_not_its_packages_init():
    assert sorted(described().files) == ["kernels/matmul.py", "kernels/perf_model.py", "kernels/tile_sizes.py"]


@pytest.mark.parametrize("text, expected", [
    ("from .perf_model import f", ["pkg/perf_model.py"]),
    ("from . import perf_model, missing", ["pkg/perf_model.py"]),
    ("from ..top import g", ["top.py"]),
    ("from ...beyond import g", []),  # above the folder's root: nothing of the folder's
    ("import helpers", ["pkg/helpers.py"]),  # a plain name, beside the kernel's file
    ("from sub import mod", ["pkg/sub/mod.py"]),
    ("import sub.mod", ["pkg/sub/mod.py"]),
    ("def wrapper():\n    from .perf_model import f", ["pkg/perf_model.py"]),  # a function's import runs when called
    ("import torch\nfrom triton import jit", []),
    ("from .perf_model import (", []),  # does not parse: its check says so
])
def test_which_files_an_import_reaches(text, expected):
    present = {"pkg/perf_model.py", "top.py", "pkg/helpers.py", "pkg/sub/mod.py", "pkg/kernel.py"}
    assert imported_paths("pkg/kernel.py", text, "pkg/kernel.py", present.__contains__) == expected


def test_the_imports_resolve_and_what_raised_in_the_siblings_is_listed(kernel_read):
    assert len(kernel_read["configs"]) == 2  # CONFIGS from tile_sizes.py, by plain name
    # Defined, not run: the perf model's module holds failing imports; its package's __init__ raises if run.
    skipped = "\n".join(kernel_read["skipped"])
    assert "kernels/perf_model.py line 5: ImportError" in skipped and "no_such_function_in_triton" in skipped, skipped
    assert "kernels/perf_model.py line 4: ImportError: torch is not loaded" in skipped, skipped
    assert "__init__" not in skipped and "undefined_name" not in skipped
    assert kernel_read["pruning"] == ["early_config_prune=early_prune", "perf_model=estimated_time", "top_k=1"]


def test_an_import_of_a_path_finds_nothing_outside_the_files(tmp_path):
    """importlib.import_module("/abs/path"), a try past the finder: a module name is identifiers between dots."""
    from worker.compile.triton_module import JobFiles

    (tmp_path / "src" / "kernels").mkdir(parents=True)
    (tmp_path / "outside.py").write_text("SECRET = 1\n")
    (tmp_path / "src" / "kernels" / "tiles.py").write_text("TILE = 64\n")
    finder = JobFiles(str(tmp_path / "src"), "kernels", {})
    assert finder.find_spec("tiles") is not None and finder.find_spec("gemmwatch_job.kernels.tiles") is not None
    outside = str(tmp_path / "outside")  # a name that is a path: os.path.join would leave the root for it
    assert "." not in outside and finder.find_spec(outside) is None
    assert finder.find_spec(f"gemmwatch_job.{outside}") is None


def test_a_sibling_left_out_is_named_where_the_kernel_is_not_found(tmp_path):
    desc = described()
    alone = described(files={path: text for path, text in desc.files.items() if not path.endswith("perf_model.py")})
    with pytest.raises(CompileRefused) as refused:
        triton_build.describe(resolve(alone, {}, H100_FIGURES, "job"), "9.0", settings(tmp_path))
    said = str(refused.value)
    assert "matmul_kernel in kernels/matmul.py is not a @triton.jit function" in said, said
    assert "perf_model" in said and "NameError: name 'early_prune' is not defined" in said, said


def test_a_wrapper_that_fails_for_a_name_its_file_could_not_define_says_which_statement_raised(tmp_path):
    """The file's configurations are left out: `from tile_sizes import CONFIGS` raises as the file is read, the
    kernel is never defined, and the wrapper's call fails on its name. Both are said, each frame under the
    job's own path."""
    desc = described("package_matmul_wrapped")
    alone = described("package_matmul_wrapped",
                      files={path: text for path, text in desc.files.items() if not path.endswith("tile_sizes.py")})
    with pytest.raises(CompileRefused) as refused:
        triton_build.wrapper_call(alone, "9.0", settings(tmp_path))
    said = str(refused.value)
    assert "calling matmul(a, b) in kernels/matmul.py failed" in said, said
    assert "NameError: name 'matmul_kernel' is not defined" in said, said
    assert "statements of the file that raised as it was read" in said and "No module named 'tile_sizes'" in said, said
    assert 'File "kernels/matmul.py", line' in said and "src/" not in said, said


def built(desc: KernelDescription, kernel_read: dict, cfg):
    launch = resolve(triton_autotune.with_config(desc, kernel_read["configs"][0]), {}, H100_FIGURES, "job")
    launch = triton_build.for_case(launch, kernel_read, kernel_args.named_values(
        launch, 256, 256, 256, None, None, None, 1.0, 0.0))
    return compiler.compile_launch(launch, "9.0", cfg)


def test_a_triton_type_is_compiled_in_as_the_type_and_none_as_none(kernel_read, tmp_path):
    """The kernel asserts acc_dtype == tl.float32 at compile time: a word "tl.float32" would fail it."""
    cfg = settings(tmp_path)
    assert built(described(), kernel_read, cfg).cubin_path.stat().st_size > 0
    # Its inputs taken to FP32 before the dot (AB_DTYPE a type, not None): another cubin.
    words = {"acc_dtype": "tl.float32", "AB_DTYPE": "tl.float32", "input_precision": None}
    other = built(described(triton={"string_constexprs": words}), kernel_read, cfg)
    assert other.cubin_path.read_bytes() != built(described(), kernel_read, cfg).cubin_path.read_bytes()


@pytest.mark.parametrize("words, said", [
    ({"acc_dtype": "tl.float99", "AB_DTYPE": None, "input_precision": None},
     "acc_dtype is tl.float99, which is no type of this Triton's triton.language"),
    ({"acc_dtype": "tl.float16", "AB_DTYPE": None, "input_precision": None}, "static_assert"),
    ({"AB_DTYPE": None, "input_precision": None}, "acc_dtype have no value"),
])
def test_a_wrong_or_missing_type_is_refused_with_its_name(kernel_read, tmp_path, words, said):
    with pytest.raises(compiler.CompileError) as refused:
        built(described(triton={"string_constexprs": words}), kernel_read, settings(tmp_path))
    assert said in str(refused.value), str(refused.value)


def test_a_wrapper_passing_types_and_none_is_read_as_words(tmp_path):
    """matmul = _matmul.apply, an autograd.Function whose forward asks lda > 1 and ldb > 1 (four calls, one
    launch) and picks the accumulator's type from torch's name for it."""
    call = triton_build.wrapper_call(described("package_matmul_wrapped"), "9.0", settings(tmp_path))
    assert call["triton"]["string_constexprs"] == {"acc_dtype": "tl.float32", "AB_DTYPE": None,
                                                   "input_precision": None}
    wrapped = described("package_matmul_wrapped").with_wrapper_call(call)
    assert wrapped.args == described().args and wrapped.triton.string_constexprs["acc_dtype"] == "tl.float32"


def test_the_check_says_prune_configs_by_is_not_run(tmp_path):
    checked = offline_check.check_kernel(described(), H100_FIGURES, settings(tmp_path))
    assert checked.builds, checked.detail
    assert "prune_configs_by (early_config_prune=early_prune, perf_model=estimated_time, top_k=1)" in checked.detail
    assert "is not run" in checked.detail


def test_every_configuration_to_time_is_compiled_ahead_beside_the_first(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMWATCH_KERNEL_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("GEMMWATCH_COMPILE_WORKERS", "3")
    monkeypatch.setenv("GEMMWATCH_DATA_DIR", str(tmp_path / "data"))
    runner = CpuRunner()
    desc = described()
    out = runner.run_case(Case(0, desc.name, 96, 80, 64, 5, KernelChoice(desc, {}, "job")),
                          TimingPolicy.from_settings(runner.device.cfg))
    runner.end_job()
    assert out.verified, out.error
    assert runner.device.prefetched == [desc.name, desc.name]  # both configurations, queued at once
    assert out.env["triton"]["chosen_by"] == "autotune here: 2 of 2 configurations timed"

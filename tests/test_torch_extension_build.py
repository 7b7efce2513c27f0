"""`"build": "torch.utils.cpp_extension"`: a repository whose kernels PyTorch's extension builder
compiles (gau-nernst/learn-cuda's `torch.utils.cpp_extension.load(extra_cuda_cflags=["-O3", ...])`)
gets the nvcc line that builder writes: PyTorch's own flags first, the repository's after, a C++
standard last. Its kernels lean on those flags (std::max in device code, __half operators of their
own), so a plain nvcc line refuses them: tried with the real nvcc on a fixture written that way."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from core.description import compile_flags
from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import FolderError, folder_defaults, load_folder
from tests.fake_gpu import H100_FIGURES
from tests.test_cutlass_library import needs_nvcc

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT / "tests" / "fixtures" / "torch_extension_repo"
TORCH = "torch.utils.cpp_extension"
# PyTorch 2.11's torch/utils/cpp_extension.py, COMMON_NVCC_FLAGS, as read on the GPU machine's image.
TORCHS_OWN = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"]


def test_torchs_flags_come_first_the_repositorys_next_and_its_standard_last():
    assert compile_flags.with_build(TORCH, ["-O3", "-lineinfo"]) == [*TORCHS_OWN, "-O3", "-lineinfo", "-std=c++17"]
    # a standard the repository names is the one nvcc gets (PyTorch adds its own only where none is given)
    assert compile_flags.with_build(TORCH, ["-O3", "-std=c++20"]) == [*TORCHS_OWN, "-O3", "-std=c++20"]
    assert compile_flags.with_build(None, ["-O3"]) == ["-O3"]


def test_each_build_the_description_takes_has_its_flags():
    """The description's `build` names and compile_flags.BUILDS are one list: a name taken with no flags
    behind it would build as a plain nvcc line."""
    literal, _none = get_args(KernelDescription.model_fields["build"].annotation)
    assert set(get_args(literal)) == set(compile_flags.BUILDS)


def test_a_repositorys_undefine_comes_after_torchs_define_and_takes_it_back():
    """Torch-built repositories often take PyTorch's half-operator defines back (`-U__CUDA_NO_HALF_OPERATORS__`,
    flash-attention's and mamba's setup.py): nvcc reads -D and -U in order, so the -U must follow."""
    flags = compile_flags.parse(compile_flags.with_build(TORCH, ["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U",
                                                                 "__CUDA_NO_HALF2_OPERATORS__", "-diag-suppress=174",
                                                                 "--threads=8"]))
    assert flags.nvcc == (*TORCHS_OWN, "-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF2_OPERATORS__",
                          "-diag-suppress=174", "--threads=8", "-std=c++17")
    assert set(flags.defines) == {"__CUDA_NO_HALF_CONVERSIONS__", "__CUDA_NO_BFLOAT16_CONVERSIONS__"}


def test_the_launch_the_worker_builds_carries_torchs_flags():
    (desc,) = load_folder(REPO, ["torch_extension_naive"])
    assert desc.build == TORCH and desc.flags == ["-O3"]  # the folder's build, the kernel's own flags
    launch = resolve(desc, {}, H100_FIGURES)
    assert list(launch.flags) == [*TORCHS_OWN, "-O3", "-std=c++17"]
    assert {"__CUDA_NO_HALF_OPERATORS__", "__CUDA_NO_BFLOAT16_CONVERSIONS__"} <= set(desc.build_flags.defines)
    # the same kernel without the build is another kernel (its binary differs)
    plain = desc.model_copy(update={"build": None})
    assert list(resolve(plain, {}, H100_FIGURES).flags) == ["-O3"]


def test_a_folders_build_goes_to_its_cuda_kernels_alone():
    entries = {"build": TORCH, "kernels": [{"name": "a", "compiler": "nvcc"}, {"name": "t", "language": "triton"},
                                           {"name": "h", "language": "helion"}, {"name": "r"}]}
    given = {e["name"]: e.get("build") for e in folder_defaults(Path("gemmwatch.json"), entries)}
    assert given == {"a": TORCH, "t": None, "h": None, "r": TORCH}
    # a CUDA kernel left on NVRTC under the folder's build is told so, not built without it
    manifest = json.loads((REPO / "gemmwatch.json").read_text())
    kernel = {**manifest["kernels"][0], "compiler": "nvrtc", "flags": [], "launcher": None,
              "entry": "matmul_naive_kernel", "block": [16, 16], "grid": {"tile": [16, 16]}}
    (entry,) = folder_defaults(REPO / "gemmwatch.json", {**manifest, "kernels": [kernel]})
    files = {"matmul_naive.cu": (REPO / "matmul_naive.cu").read_text()}
    with pytest.raises(ValidationError, match='set "compiler": "nvcc"'):
        KernelDescription.model_validate({**entry, "files": files})
    # (a Triton kernel given one itself is refused: tests/test_triton_kernels.py)


def test_a_folders_nvcc_line_goes_to_its_cuda_kernels_each_kernels_own_field_first():
    """LeetCUDA's hgemm builds every file with one extra_cuda_cflags and one list of -I folders (its
    tools/utils.py): said once for the folder, as the repository says it."""
    line = {"compiler": "nvcc", "flags": ["-O3", "--use_fast_math"], "include_dirs": ["utils", "mma/basic"]}
    entries = {"build": TORCH, **line, "kernels": [
        {"name": "a"}, {"name": "own", "flags": ["-O2"], "include_dirs": ["inc"]},
        {"name": "t", "language": "triton"}, {"name": "h", "language": "helion"}]}
    given = {e["name"]: {f: e.get(f) for f in line} for e in folder_defaults(Path("gemmwatch.json"), entries)}
    assert given["a"] == line
    assert given["own"] == {**line, "flags": ["-O2"], "include_dirs": ["inc"]}
    assert given["t"] == given["h"] == {"compiler": None, "flags": None, "include_dirs": None}


def test_a_folders_form_and_libraries_go_to_its_kernels_each_kernels_own_field_first():
    """cute-gemm-101's kernels share a form (A row-major, B and C column-major, FP16 sums) and CUTLASS's
    headers: said once for the folder. CUTLASS is an nvcc line's, not a Triton kernel's."""
    form = {"layout": {"A": "row", "B": "col", "C": "col"}, "compute_mode": "fp16", "accumulate": "fp16"}
    entries = {**form, "libraries": ["cutlass"], "kernels": [
        {"name": "a"}, {"name": "own", "compute_mode": "fp32", "accumulate": None}, {"name": "t", "language": "triton"}]}
    given = {e["name"]: e for e in folder_defaults(Path("gemmwatch.json"), entries)}
    assert {f: given["a"][f] for f in [*form, "libraries"]} == {**form, "libraries": ["cutlass"]}
    assert (given["own"]["compute_mode"], given["own"]["accumulate"], given["own"]["layout"]) == ("fp32", None, form["layout"])
    assert "libraries" not in given["t"] and given["t"]["layout"] == form["layout"]


def test_a_folders_args_go_to_its_cuda_kernels_each_kernels_own_first():
    """gemm-zoo's eight functors are all called `(a, b, c, d, alpha, beta, stream)`: said once for the
    folder. A Triton kernel's parameters are its own, so it gets none of them."""
    args = ["M", "N", "K", "A", "B", "C", "D", "alpha", "beta", "stream"]
    entries = {"args": args, "kernels": [{"name": "a"}, {"name": "own", "args": ["A", "B", "C"]},
                                         {"name": "t", "language": "triton"}]}
    given = {e["name"]: e.get("args") for e in folder_defaults(Path("gemmwatch.json"), entries)}
    assert given == {"a": args, "own": ["A", "B", "C"], "t": None}


def test_a_header_reached_only_through_the_folders_include_dirs_is_carried(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "tile.h").write_text("#pragma once\nconstexpr int TILE = 16;\n")
    (tmp_path / "k.cu").write_text('#include "tile.h"\n' + (REPO / "matmul_naive.cu").read_text())
    kernel = {**json.loads((REPO / "gemmwatch.json").read_text())["kernels"][0], "name": "k", "source": "k.cu"}
    for field in ("compiler", "flags"):
        del kernel[field]
    # "." is the folder's root, as the repository's `-I` of its own folder says it
    manifest = {"build": TORCH, "compiler": "nvcc", "flags": ["-O3"], "include_dirs": [".", "inc"], "kernels": [kernel]}
    (tmp_path / "gemmwatch.json").write_text(json.dumps(manifest))
    (desc,) = load_folder(tmp_path)
    assert (desc.build, desc.compiler, desc.flags, desc.include_dirs) == (TORCH, "nvcc", ["-O3"], [".", "inc"])
    assert "inc/tile.h" in desc.files
    # without the folder's include_dirs the header is off the include path, and the error names the field
    (tmp_path / "gemmwatch.json").write_text(json.dumps({**manifest, "include_dirs": []}))
    with pytest.raises(FolderError, match='name "inc" in include_dirs'):
        load_folder(tmp_path)
    for climbing in ("..", "./inc", "inc/.."):  # the root, and nothing above or beside it
        (tmp_path / "gemmwatch.json").write_text(json.dumps({**manifest, "include_dirs": [climbing]}))
        with pytest.raises(FolderError, match="include_dirs"):
            load_folder(tmp_path)


def _description(**fields) -> dict:
    (desc,) = load_folder(REPO, ["torch_extension_naive"])
    return {**desc.model_dump(mode="json"), **fields}


@pytest.mark.parametrize(("fields", "said"), [
    ({"compiler": "nvrtc", "launcher": None, "flags": [], "entry": "matmul_naive_kernel", "block": [16, 16],
      "grid": {"tile": [16, 16]}}, 'that tool builds with nvcc: set "compiler": "nvcc"'),
    ({"build": "setuptools"}, "torch.utils.cpp_extension"),
])
def test_a_build_that_cannot_be_is_refused_by_name(fields, said):
    with pytest.raises(ValidationError) as refused:
        KernelDescription.model_validate(_description(**fields))
    assert said in str(refused.value)


def _check(folder: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GEMMWATCH_DATA_DIR": str(cwd / "data"), "COLUMNS": "400", "GEMMWATCH_COMPILE_TIMEOUT_S": "300"}
    return subprocess.run([sys.executable, "-m", "cli.main", "check", "--kernels-dir", str(folder)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@needs_nvcc
def test_the_repository_builds_with_its_build_and_not_without(tmp_path):
    built = _check(REPO, tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    # The same files, the manifest without its build: nvcc refuses both of what torch's flags allow.
    plain = tmp_path / "plain"
    shutil.copytree(REPO, plain)
    manifest = json.loads((plain / "gemmwatch.json").read_text())
    del manifest["build"]
    # (the binding that makes C has no description without the build: tests/test_torch_tensor_launchers.py)
    manifest["kernels"] = [k for k in manifest["kernels"] if "C" in k["args"]]
    (plain / "gemmwatch.json").write_text(json.dumps(manifest))
    refused = _check(plain, tmp_path)
    assert refused.returncode == 1 and "error" in refused.stdout
    hint = "\"build\": \"torch.utils.cpp_extension\" gives nvcc PyTorch's own"
    assert hint in " ".join(refused.stdout.split()), refused.stdout  # nvcc's words, then the field that answers them
    # The launcher that takes torch::Tensor finds no <ATen/...> without the build's stand-in, and is told so too.
    assert "ATen/cuda/CUDAContext.h: No such file or directory" in refused.stdout, refused.stdout
    assert " ".join(refused.stdout.split()).count(hint) == 2, refused.stdout
    # Each of torch's flags is needed: without the constexpr one, std::max from device code is refused;
    # without its half-operator define, the file's own __half operator* clashes with cuda_fp16.h's.
    for flags, said in ((TORCHS_OWN[:4], "--expt-relaxed-constexpr"), (TORCHS_OWN[4:], 'more than one operator "*"')):
        manifest["kernels"][0]["flags"] = ["-O3", *flags]
        (plain / "gemmwatch.json").write_text(json.dumps(manifest))
        refused = _check(plain, tmp_path)
        assert refused.returncode == 1 and said in refused.stdout, refused.stdout
    # With the build, a -U of the half-operator define after it brings cuda_fp16.h's operators back, and the clash.
    manifest["build"], manifest["kernels"][0]["flags"] = TORCH, ["-O3", "-U__CUDA_NO_HALF_OPERATORS__"]
    (plain / "gemmwatch.json").write_text(json.dumps(manifest))
    refused = _check(plain, tmp_path)
    assert refused.returncode == 1 and 'more than one operator "*"' in refused.stdout, refused.stdout
    assert hint not in " ".join(refused.stdout.split())  # the build is given: the -U is the repository's own doing


@pytest.mark.parametrize(("log", "hinted"), [
    ('sgemm.cu(9): catastrophic error: cannot open source file "torch/extension.h"', True),  # nvcc's front end
    ("sgemm.cu:9:10: fatal error: ATen/cuda/CUDAContext.h: No such file or directory", True),  # the host compiler
    ('sgemm.cu(9): catastrophic error: cannot open source file "c10/cuda/CUDAGuard.h"', True),
    ("sgemm.cu:9:10: fatal error: mylib/torch/ops.h: No such file or directory", False),  # another library's
    ('sgemm.cu(9): catastrophic error: cannot open source file "cutlass/gemm/device/gemm.h"', False),
])
def test_pytorchs_headers_not_found_bring_the_builds_name(log, hinted):
    assert bool(compile_flags.build_hint(log, None)) is hinted
    assert compile_flags.build_hint(log, TORCH) == ""  # given the build, the stand-in was on the path

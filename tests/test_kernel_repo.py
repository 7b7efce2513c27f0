"""A kernel engineer's repository gets in as it is (issue 19): tests/fixtures/kernel_repo imitates
what public SGEMM repositories hold (host includes in every kernel file, an umbrella header, a
constant one header takes from another, templates whose parameters are the tunables, a grid over
M first, a kernel that reads C at beta = 0, a column-major kernel in C style) plus a
gemmwatch.json. It goes through `gemmwatch ci` and a real worker here (the CPU double stands in
for the GPU; every file is compiled by NVRTC in the confined compile step), and on the GPU in
tests/test_gpu_kernel_repo.py.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from core.description.kernel_folder import FolderError, load_folder
from tests.conftest import make_client, wait_for_job
from tests.test_ci_hook import CI_DEADLINE, ci, server  # noqa: F401 (fixture)
from worker.measure.verify import LEAVES_C, READS_C

pytestmark = CI_DEADLINE  # it waits on `gemmwatch ci` (tests/test_ci_hook.py)

REPO = Path(__file__).parent / "fixtures" / "kernel_repo"


def test_the_folder_carries_what_each_kernel_reaches():
    kernels = {d.name: d for d in load_folder(REPO)}
    assert set(kernels["rowwise"].files) == {"src/kernels.cuh", "src/kernels/common.cuh", "src/kernels/1_rowwise.cuh",
                                             "src/kernels/2_column_strip.cuh"}
    assert set(kernels["colmajor"].files) == {"include/col_major.cuh"}
    assert kernels["colmajor"].layout == "column" and kernels["rowwise"].grid.order == "m_first"
    for d in kernels.values():
        for path, text in d.files.items():
            assert (REPO / path).read_text() == text  # unchanged


@pytest.mark.long
def test_the_repository_through_gemmwatch_ci_and_a_worker(server, tmp_path):  # noqa: F811
    url, token = server
    run = ci(url, token, tmp_path, "--commit", "feed0001", "--branch", "main", "--parents", "", "--size", "130x97x75",
             "--kernels-dir", str(REPO))
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("rowwise", "column_strip", "colmajor"):
        row = next(line for line in run.stdout.splitlines() if line.startswith(f"| {name} "))
        assert "unverified" not in row and "—" not in row.split("|")[3], row  # verified, with GFLOPS


def test_a_kernel_reading_c_at_beta_zero_is_verified_and_said_to(cfg, start_worker):
    start_worker(cfg)
    client = make_client(cfg)
    sources = [d.model_dump(mode="json") for d in load_folder(REPO)]
    job = wait_for_job(client, client.post("/api/jobs", json={"sources": sources, "sizes": [[70, 33, 65]]}).json()["id"],
                       timeout=180)
    assert job["status"] == "succeeded", job["error"]
    got = {r["variant"]: r for r in job["results"]}
    assert all(r["verified"] for r in got.values()), {n: r["error"] for n, r in got.items()}
    assert got["rowwise"]["env"]["c_convention"] == READS_C
    assert got["colmajor"]["env"]["c_convention"] == LEAVES_C
    assert got["colmajor"]["env"]["launch"]["layout"] == "column"
    assert got["rowwise"]["env"]["launch"]["grid"] == [3, 2, 1]  # x over M's 3 tiles of 32, y over N's 2


def test_a_kernel_that_leaves_elements_unwritten_is_wrong(cfg, start_worker):
    """The check that proves every element written is the sentinel run, not the NaN probe: a
    kernel that reads C at beta = 0 and one that skips elements are told apart."""
    start_worker(cfg)
    client = make_client(cfg)
    [rowwise] = [d for d in load_folder(REPO) if d.name == "rowwise"]
    skipping = rowwise.model_copy(update={"name": "skipping", "files": {
        **rowwise.files, "src/kernels/1_rowwise.cuh": "#define FAKE_GPU_UNWRITTEN 5\n" + rowwise.files["src/kernels/1_rowwise.cuh"]}})
    body = {"sources": [skipping.model_dump(mode="json")], "sizes": [[40, 40, 40]]}
    job = wait_for_job(client, client.post("/api/jobs", json=body).json()["id"], timeout=120)
    result = job["results"][0]
    assert not result["verified"] and result["gflops"] is None
    assert result["error"].startswith("wrong result: 5 of 1600 elements of C never written")


@pytest.mark.parametrize("change, words", [
    (lambda e: e[1].pop("entry"), ["'column_strip' (entry 2)", "entry", "a kernel's launch needs them"]),
    (lambda e: e[1].update(grid={"tile": ["TILE_M", "TILE_Q"]}), ["'column_strip'", "grid.tile", "TILE_Q"]),
    (lambda e: e[0].update(source="src/nope.cuh"), ["'rowwise'", "src/nope.cuh: no such file"]),
    (lambda e: e[2].update(layout="diagonal"), ["'colmajor'", "layout"]),
    (lambda e: e[1]["tunables"]["TILE_M"].update(default=48), ["'column_strip'", "default 48"]),
])
def test_a_broken_manifest_is_named_kernel_and_field_before_anything_is_posted(tmp_path, change, words):
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    entries = json.loads((repo / "gemmwatch.json").read_text())
    change(entries)
    (repo / "gemmwatch.json").write_text(json.dumps(entries))
    with pytest.raises(FolderError) as refused:
        load_folder(repo)
    for word in words:
        assert word in str(refused.value), str(refused.value)
    # The CLI says the same and exits 2 without posting (no server listens at that address).
    run = ci("http://127.0.0.1:9", "token", tmp_path, "--commit", "feed0002", "--kernels-dir", str(repo))
    assert run.returncode == 2 and "cannot be posted" in run.stderr and words[0] in run.stderr, run.stderr


def test_kernels_refused_for_the_same_reasons_are_said_once_and_named_after(tmp_path):
    """Three kernels with one Makefile line whose one flag is refused: its reasons (the allow-list) once, under
    the first; the others name it. A kernel refused for another reason still gets its own."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    entries = json.loads((repo / "gemmwatch.json").read_text())
    for entry in entries:
        entry.update(compiler="nvcc", flags=["-O3", "-I."])
    entries[2]["layout"] = "diagonal"
    (repo / "gemmwatch.json").write_text(json.dumps(entries))
    with pytest.raises(FolderError) as refused:
        load_folder(repo)
    said = str(refused.value)
    assert said.count("'-I.' is not allowed") == 2, said  # the first kernel's, and the third's beside its layout
    second = [line for line in said.splitlines() if "(entry 2)" in line]
    assert second == [f"gemmwatch.json: kernel {entries[1]['name']!r} (entry 2): refused as kernel "
                      f"{entries[0]['name']!r} (entry 1) is, above"], said
    assert "layout" in said and "(entry 3): refused as" not in said


def test_an_include_the_repository_does_not_carry_is_named_with_its_file_and_line(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    (repo / "src" / "kernels" / "common.cuh").unlink()
    with pytest.raises(FolderError) as refused:
        load_folder(repo)
    assert 'src/kernels.cuh, line 4: #include "kernels/common.cuh" is neither a file of the kernel' in str(refused.value)


def test_a_compile_error_in_a_header_names_that_headers_own_path_and_line(tmp_path):
    """NVRTC names an in-memory header by the name its #include spells; the error a user reads
    names the file of their repository, with the line."""
    from core.description.kernel import resolve
    from core.settings import Settings
    from tests.fake_gpu import H100_FIGURES
    from worker.compile import compiler

    [rowwise] = [d for d in load_folder(REPO) if d.name == "rowwise"]
    header = "src/kernels/common.cuh"
    broken = rowwise.model_copy(update={"files": {**rowwise.files, header: rowwise.files[header].replace(
        "const int WARPSIZE = 32;", "const int WARPSIZE = ;")}})
    with pytest.raises(compiler.CompileError) as failed:
        compiler.compile_launch(resolve(broken, {}, H100_FIGURES), "9.0", Settings(GEMMWATCH_DATA_DIR=str(tmp_path)))

    line = rowwise.files[header].splitlines().index("const int WARPSIZE = 32; // the fixture's one constant") + 1
    assert f"{header}({line}): error" in str(failed.value), str(failed.value)


def test_files_saved_with_a_byte_order_mark_get_in_and_compile(tmp_path):
    """Editors on Windows save UTF-8 with a byte-order mark. NVRTC reads one as an unrecognized
    token (and the source guard, a line starting with it as no directive), so a repository saved
    that way failed to compile; its manifest failed to parse. The mark is dropped on reading and
    from a posted description's files, before the guard reads them."""
    from core.description.kernel import resolve
    from core.description.kernel_description import KernelDescription
    from core.settings import Settings
    from tests.fake_gpu import H100_FIGURES
    from worker.compile import compiler

    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    for path in [repo / "gemmwatch.json", *repo.rglob("*.cuh")]:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    [rowwise] = [d for d in load_folder(repo) if d.name == "rowwise"]
    assert set(rowwise.files) == {"src/kernels.cuh", "src/kernels/common.cuh", "src/kernels/1_rowwise.cuh",
                                  "src/kernels/2_column_strip.cuh"}
    assert not any(text.startswith("\ufeff") for text in rowwise.files.values())
    built = compiler.compile_launch(resolve(rowwise, {}, H100_FIGURES), "9.0", Settings(GEMMWATCH_DATA_DIR=str(tmp_path)))
    assert built.cubin_path.read_bytes()[:4] == b"\x7fELF"

    posted = rowwise.model_dump(mode="json")
    posted["files"] = {path: "\ufeff" + text for path, text in posted["files"].items()}
    assert KernelDescription.model_validate(posted).files == rowwise.files


@pytest.mark.parametrize(("spelled", "holder"), [('"utils.h"', "src"), ('"kernels/common.cuh"', "src"),
                                                 ("<helper_cuda.h>", "src")])
def test_an_include_the_folder_holds_off_the_include_path_is_named_with_the_folder_to_add(tmp_path, spelled, holder):
    """HamzaElshafie/h100_gemm: src/kernels/hopper/launcher.cu says `#include "utils.h"`, the file is
    src/utils.h, and its CMake puts src on the include path. Without "include_dirs": ["src"] the folder
    loaded, and nvcc's build failed with "utils.h: No such file"; now the loader says which folder.
    cuda-samples spells its Common/ headers with brackets (`#include <helper_cuda.h>`): the same.
    (<vector>, the host's, is no file of the folder's, and is left to the compiler.)"""
    name = spelled[1:-1]
    (tmp_path / "src" / "kernels" / "hopper").mkdir(parents=True)
    (tmp_path / "src" / Path(name)).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "src" / name).write_text("#pragma once\n")
    (tmp_path / "src" / "kernels" / "hopper" / "launcher.cu").write_text(
        f'#include <vector>\n#include {spelled}\nextern "C" __global__ void k(int M, int N, int K, float alpha, '
        'const float* A, const float* B, float beta, float* C) { C[0] = 0.0f; }\n')
    kernel = {"name": "h", "source": "src/kernels/hopper/launcher.cu", "entry": "k", "compiler": "nvcc", "flags": ["-O3"],
              "block": [16, 16], "grid": {"tile": [16, 16]}}
    (tmp_path / "gemmwatch.json").write_text(json.dumps([kernel]))
    with pytest.raises(FolderError, match=re.escape(f'src/kernels/hopper/launcher.cu:2 includes {spelled}, which this '
                                                    f'folder holds in {holder} (as {holder}/{name}) off the include '
                                                    f'path: name "{holder}" in include_dirs')):
        load_folder(tmp_path)
    (tmp_path / "gemmwatch.json").write_text(json.dumps([{**kernel, "include_dirs": [holder]}]))
    desc, = load_folder(tmp_path)
    assert f"{holder}/{name}" in desc.files

"""Every built-in kernel's description survives every path unchanged: the kernels folder the CLI
reads, POST /api/jobs, the job's stored sources, the kernel store a plan freezes into, the
confirmation job that thaws it, and the launch the runner resolves on the GPU (issue 19).

A path that dropped a field (a wave grid, a target, dynamic shared memory, a compute mode, a
define) made the built-in tail-split kernels write NaN and tf32_wgmma fail to compile when sent
by `gemmwatch ci --kernels-dir kernels`; these tests compare whole descriptions, so any field
lost on any path fails them.
"""

from pathlib import Path

import pytest

from cli.ci import build_job
from core.description.builtins import KERNELS_DIR, builtin_kernels
from core.records.db import session_factory
from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.records.kernel_store import freeze, kernels_of_job, thaw
from core.records.models import Job
from tests.conftest import make_client, wait_for_job
from tests.fake_gpu import H100_FIGURES
from worker.measure.cases import KernelChoice, cases_from_plan, choice_from_stored

BUILTINS = list(builtin_kernels())


def same_launch(a: KernelChoice, b: KernelChoice, size=(4096, 4096, 4096)) -> None:
    """What the runner would compile and launch from each for a case of that size (sizes a Triton kernel
    takes as tl.constexpr compiled in): identical, field by field."""
    la, lb = (resolve(x.description, x.tunables, H100_FIGURES, x.origin, size) for x in (a, b))
    assert la == lb
    assert la.grid(*size) == lb.grid(*size) and la.dynamic_smem(*size) == lb.dynamic_smem(*size)


def test_the_cli_sends_each_builtin_as_it_is_described():
    body = build_job("abcd1234", "main", "r", [[64, 64, 64]], None, [], KERNELS_DIR)
    assert [s["name"] for s in body["sources"]] == BUILTINS
    for sent in body["sources"]:
        assert KernelDescription.model_validate(sent) == builtin_kernels()[sent["name"]]


@pytest.mark.parametrize("name", BUILTINS)
def test_freezing_and_thawing_keeps_every_field(cfg, name):
    desc = builtin_kernels()[name]
    tunables = desc.configurations()[-1]  # a configuration other than the defaults, where there is one
    with session_factory(cfg)() as db:
        frozen = freeze(db, desc, tunables, "job")
        db.commit()
        thawed = thaw(db, frozen, name)
    back = choice_from_stored(thawed)
    assert back.description == desc and back.tunables == tunables and back.origin == "job"
    same_launch(back, KernelChoice(desc, tunables, "job"))


# Both databases' runs on one xdist worker, one after the other: run side by side, each compiled
# the 22 built-ins' defaults for itself before the other had cached them (about 20 s of CPU on
# the 2-core machine); after one another, the second finds them in the run's cache.
# The first job compiles every built-in cold (35 s of one core on an idle 2-core machine, several
# times that beside five other test workers): deadlines for a busy machine, not an idle one.
@pytest.mark.long
@pytest.mark.timeout(3600)
@pytest.mark.xdist_group("kernel_paths")
def test_every_builtin_through_the_api_a_worker_and_a_confirmation(cfg, start_worker, shared_kernel_cache):
    """All built-ins as a commit's own sources (what `gemmwatch ci --kernels-dir kernels` sends),
    measured by a real worker, then confirmed against themselves in an A/B job: the stored sources,
    each plan's frozen kernel and each confirmation case thawed from the store are the description
    the folder holds, and every case runs (the CPU double stands in for the GPU: tf32_wgmma, built
    for sm_90a only, is said not applicable unless the double reports compute capability 9.0)."""
    # The run's compile cache: tests/test_kernel_compile.py compiles these same configurations.
    # Its limits for a loaded machine (load 13-18 on 2 cores: a process gets a sixth of a core or less):
    # a cold compile of a large built-in is several times as long as idle, where the default 60 s compile
    # limit and 120 s case limit are meant for a GPU worker's own machine, not for this one.
    start_worker(cfg, FAKE_GPU_COMPUTE_CAPABILITY="9.0", GEMMWATCH_KERNEL_CACHE_DIR=str(shared_kernel_cache),
                 GEMMWATCH_COMPILE_TIMEOUT_S="900", GEMMWATCH_CASE_TIMEOUT_S="1200")
    client = make_client(cfg)
    sources = [d.model_dump(mode="json") for d in builtin_kernels().values()]

    def run(sha: str, parents: list[str]) -> dict:
        resp = client.post("/api/jobs", json={"sources": sources, "sizes": [[64, 48, 40]],
                                              "commit": {"sha": sha, "repo": "r", "branch": "main", "parents": parents}})
        assert resp.status_code == 202, resp.text[:500]
        job = wait_for_job(client, resp.json()["id"], timeout=1800)  # the cold first job: 130 s at load 4
        assert job["status"] == "succeeded", job["error"]
        assert all(r["verified"] for r in job["results"]), [r["error"] for r in job["results"] if not r["verified"]]
        return job

    run("aaaa0001", [])  # the base's results, which the head's confirmation compares with
    head = run("aaaa0002", ["aaaa0001"])
    resp = client.post(f"/api/jobs/{head['id']}/confirm", json={})
    assert resp.status_code == 202, resp.text
    confirm = wait_for_job(client, resp.json()["id"], timeout=1800)
    assert confirm["status"] == "succeeded", confirm["error"]
    verdicts = client.get(f"/api/jobs/{confirm['id']}/confirmation").json()
    assert sorted(v["variant"] for v in verdicts) == sorted(BUILTINS)
    assert all(v["status"] != "failed" for v in verdicts), [v["reason"] for v in verdicts if v["status"] == "failed"]

    with session_factory(cfg)() as db:
        stored = db.get(Job, head["id"])
        kernels = kernels_of_job(stored.sources)
        for name in BUILTINS:
            assert kernels[name] == builtin_kernels()[name]  # the API stored every field
        own = {s["name"] for s in stored.sources}
        for case in cases_from_plan(stored.plan, stored.id, kernels, own):  # the plan thaws to the same
            assert case.kernel.description == builtin_kernels()[case.variant] and case.kernel.origin == "job"
        confirmation = db.get(Job, confirm["id"])
        for case in cases_from_plan(confirmation.plan, confirmation.id, {}):  # the A/B cases, from the store
            original = KernelChoice(builtin_kernels()[case.variant], {}, "job")
            for side in (case.kernel, case.base):
                assert side.description == original.description
                same_launch(side, KernelChoice(original.description, side.tunables, "job"))


def test_a_builtins_own_description_is_served_whole(client):
    """GET /api/kernels/{name}: a built-in as a kernels folder entry, files included, to start from."""
    got = client.get("/api/kernels/tail_split_k").json()
    assert KernelDescription.model_validate(got) == builtin_kernels()["tail_split_k"]
    assert got["grid"]["x"].startswith("split_tail_grid(") and got["defines"]["NUM_SMS"] == "SM_COUNT"
    assert set(got["files"]) == {"tail_split_k.cu", "common.cuh", "tile128.cuh"}
    assert client.get("/api/kernels/nope").status_code == 404
    schema = client.get("/api/kernels/schema").json()
    assert {"files", "source", "entry", "grid", "target", "compute_mode", "defines", "tunables"} <= set(schema["properties"])


def test_the_builtin_folder_is_a_folder_a_user_could_copy(tmp_path):
    """kernels/ copied elsewhere, as a user would start from it: it loads to the same kernels."""
    import shutil

    from core.description.kernel_folder import load_folder

    copy = tmp_path / "my-kernels"
    shutil.copytree(KERNELS_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    assert {d.name: d for d in load_folder(copy)} == builtin_kernels()
    assert not any(Path(copy).glob("*.py"))


def test_rows_from_before_the_one_description_still_run(cfg):
    """A job's source, a plan's frozen kernel and a confirmation's thawed kernel as they were stored
    before kernels had one description (one source text, a tile, an `arch`) are read as the
    description they amount to, every field they had kept."""
    from core.records.kernel_store import description_from_stored, keep

    old_source = {"name": "mine", "source": "extern \"C\" __global__ void k(int M) {}\n", "entry": "k",
                  "block": [16, 16], "tile": [32, 64], "defines": {"BK": 8}}
    desc = description_from_stored(old_source)
    assert desc.files == {"mine.cu": old_source["source"]} and desc.grid.tile == [32, 64] and desc.defines == {"BK": 8}
    with session_factory(cfg)() as db:
        frozen = {"digest": keep(db, old_source["source"]), "entry": "k", "block": [16, 16, 1], "tile": [32, 64],
                  "defines": {}, "compute_mode": "tf32", "origin": "job", "arch": "sm_90a", "dynamic_smem": 4096}
        db.commit()
        thawed = thaw(db, frozen, "mine")
    choice = choice_from_stored(thawed)
    assert choice.description.target == "sm_90a" and choice.description.compute_mode == "tf32"
    assert choice.description.dynamic_smem == 4096 and choice.origin == "job"
    old_confirmation_side = {**frozen, "source": old_source["source"]}  # what an old confirm plan holds
    assert choice_from_stored(old_confirmation_side).description.target == "sm_90a"


# Fields no built-in sets (a CUTLASS library, a Triton kernel and its options, an `args` expression, a wrapper with its sizes
# compiled in, FP8's FP16 C): the same paths, from the folders of tests/fixtures, so that a path that drops one of them
# fails here too.
FIXTURES = Path(__file__).parent / "fixtures"
NEWER_FIELDS = [(FIXTURES / "cutlass_repo", "cutlass_naive"), (FIXTURES / "cutlass_repo", "cutlass_simt_sgemm"),
                (FIXTURES / "triton_repo", "triton_matmul_fp16"), (FIXTURES / "host_launchers", "host_gemm_split"),
                (FIXTURES / "host_launchers", "host_gemm_from_maps"), (FIXTURES / "host_launchers", "host_gemm_byte_strides"),
                (FIXTURES / "host_launchers", "host_gemm_overloaded"),  # a launcher named with its parameter types
                (FIXTURES / "helion_generated", "helion_matmul_64"),
                (FIXTURES / "helion_kernel", "helion_open"), (FIXTURES / "helion_kernel", "helion_split_k"),
                (FIXTURES / "fp8_fp16_repo", "fp8_half_out"),  # FP8's "output": "fp16"
                (FIXTURES / "fp8_block_repo", "fp8_block_tn"),  # FP8's block scales
                (FIXTURES / "fp8_block_repo", "fp8_block_triton_sized"),  # and triton.size_constexprs
                (FIXTURES / "fp8_block_repo", "fp8_block_grouped"),  # and Triton args that are expressions
                (FIXTURES / "torch_extension_repo", "torch_extension_naive"),  # PyTorch's extension build
                (FIXTURES / "torch_extension_repo", "torch_extension_sgemm_tensors"),  # and torch::Tensor matrices
                (FIXTURES / "torch_extension_repo", "torch_extension_sgemm_returns_c"),  # and a C it makes
                (KERNELS_DIR, "bf16_wgmma_persistent")]  # its maps by value with zeros_when_absent


# The first @triton.autotune configuration of those kernels, as triton_build.describe lists it.
AUTOTUNED = {"fp8_block_triton_sized": {"kwargs": {"BLOCK_M": 64, "BLOCK_N": 64}, "num_warps": 4, "num_stages": 3}}


@pytest.mark.parametrize(("folder", "name"), NEWER_FIELDS, ids=lambda x: getattr(x, "name", x))
def test_libraries_and_triton_kernels_keep_every_field_down_the_cli_and_the_store(cfg, folder, name):
    from core.description.kernel_folder import load_folder

    desc = next(d for d in load_folder(folder) if d.name == name)
    # the fields under test are set (a launcher's tensor maps: the runner encodes them for it; an
    # `args` expression, worked out for each case)
    assert (desc.libraries or desc.language in ("triton", "helion") or desc.units or (desc.launcher and desc.tensor_maps)
            or any(spec.zeros_when_absent for spec in desc.tensor_maps.values())
            or any(str(arg).startswith("=") for arg in desc.args) or desc.output == "fp16" or desc.scales != "tensor"
            or desc.build or "(" in (desc.launcher or ""))
    if desc.scales != "tensor":  # what reaches the runner: the recipe, and the sizes compiled in
        launch = resolve(desc, {}, H100_FIGURES, "job", (96, 80, 64))
        assert launch.precision.scales == desc.scales_key
        assert desc.triton is None or all(launch.defines[n] == {"N": 80, "K": 64}[n] for n in desc.triton.size_constexprs)
    body = build_job("abcd1234", "main", "r", [[64, 64, 64]], None, [], folder)
    sent = next(s for s in body["sources"] if s["name"] == name)
    assert KernelDescription.model_validate(sent) == desc
    with session_factory(cfg)() as db:
        frozen = freeze(db, desc, {}, "job")
        db.commit()
        back = choice_from_stored(thaw(db, frozen, name))
    assert back.description == desc
    assert back.description.fixed_sizes == desc.fixed_sizes  # None, or the sizes it runs at alone
    if name in AUTOTUNED:  # its grid reads a @triton.autotune configuration's values: the launch of one
        back = KernelChoice(back.description.with_triton_config(AUTOTUNED[name]), {}, "job")
        desc = desc.with_triton_config(AUTOTUNED[name])
    if desc.wrapper is None:  # a wrapper's launch is read on the worker (tests/test_triton_wrapper.py)
        same_launch(back, KernelChoice(desc, {}, "job"), size=(96, 80, 64))


def test_the_fixture_with_sizes_compiled_in_sets_them():
    """NEWER_FIELDS's helion_generated is there for `sizes`: it must keep setting them."""
    from core.description.kernel_folder import load_folder

    (desc,) = load_folder(FIXTURES / "helion_generated")
    assert desc.fixed_sizes == {(64, 64, 64), (32, 48, 64)} and desc.wrapper == "matmul"


def test_a_size_multiple_is_kept_down_the_cli_and_the_store(cfg, tmp_path):
    """`size_multiple` (no built-in sets it): a folder kernel that declares its tile keeps it through
    `gemmwatch ci`'s job body and the kernel store, and still refuses the sizes it would write past C at."""
    import json
    import shutil

    from core.description.kernel_folder import load_folder

    for name in ("naive.cu", "common.cuh"):
        shutil.copy(KERNELS_DIR / name, tmp_path / name)
    entry = {"name": "whole_tiles", "source": "naive.cu", "entry": "sgemm_naive", "block": [32, 32, 1],
             "grid": {"tile": [32, 32]}, "size_multiple": {"M": 32, "K": 16}}
    (tmp_path / "gemmwatch.json").write_text(json.dumps([entry]))
    (desc,) = load_folder(tmp_path)
    assert desc.size_multiple is not None and desc.size_multiple.M == 32
    body = build_job("abcd1234", "main", "r", [[64, 64, 64]], None, [], tmp_path)
    sent = next(s for s in body["sources"] if s["name"] == "whole_tiles")
    assert KernelDescription.model_validate(sent) == desc
    with session_factory(cfg)() as db:
        frozen = freeze(db, desc, {}, "job")
        db.commit()
        back = choice_from_stored(thaw(db, frozen, "whole_tiles"))
    assert back.description == desc
    assert back.description.size_refusal(64, 8, 48) is None
    assert "M 40 (not a multiple of 32)" in back.description.size_refusal(40, 8, 48)

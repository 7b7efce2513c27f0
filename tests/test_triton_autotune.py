"""Issue 50: a Triton file as a repository has it (tests/fixtures/triton_script_repo: a kernel under
@triton.autotune whose configurations come from asking Triton's driver, a module-level script that
runs the kernel on the GPU, benchmarks it and then loops forever), read for its definitions only in
the confined compile process; its configurations, each compiled as a description of its own; and
the choice among them per case (worker/measure/triton_autotune.py), kept per kernel, bucket, GPU and Triton
release. Real Triton and the real compile process; the timing of each configuration is the one
thing given here (on the GPU: tests/test_gpu_triton.py)."""

import json
from pathlib import Path

import pytest

from core.description.kernel import resolve
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder
from core.settings import Settings
from tests.fake_gpu import H100_FIGURES
from worker.compile import compiler, triton_build
from worker.arguments import kernel_args
from worker.measure import triton_autotune
from worker.compile.compiled import CompileRefused

triton = pytest.importorskip("triton")
REPO = Path(__file__).parent / "fixtures" / "triton_script_repo"


def described(**changes) -> KernelDescription:
    desc = load_folder(REPO)[0]
    return KernelDescription.model_validate({**desc.model_dump(mode="json", exclude_none=True), **changes})


def settings(tmp_path) -> Settings:
    return Settings(GEMMWATCH_DATA_DIR=str(tmp_path), GEMMWATCH_COMPILE_TIMEOUT_S="300")


@pytest.fixture(scope="module")
def kernel_read(tmp_path_factory):
    """What the confined compile process reads of the fixture's kernel."""
    cfg = settings(tmp_path_factory.mktemp("read"))
    return triton_build.describe(resolve(described(), {}, H100_FIGURES, "job"), "9.0", cfg)


def test_the_files_definitions_are_read_and_its_script_is_not_run(kernel_read):
    # The configurations came from the decorator, evaluated with the worker's target as the
    # driver's answer; the script's loop would have held the compile until its time limit.
    assert [c["kwargs"]["BLOCK_M"] for c in kernel_read["configs"]] == [64, 128, 32]
    assert [(c["num_warps"], c["num_stages"]) for c in kernel_read["configs"]] == [(4, 3), (8, 4), (2, 2)]
    assert kernel_read["params"][:3] == ["a_ptr", "b_ptr", "c_ptr"]
    assert kernel_read["constexprs"] == ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SCALE_BY"]
    # The script's assignments that need a GPU (or torch) failed and were passed over, each said.
    # torch is never loaded there (its import half-succeeds in a confined process, and can crash it),
    # so `checked = matmul(a, a)` never had an `a`.
    assert kernel_read["skipped"][0].startswith("line 6: ImportError: torch is not loaded where gemmwatch reads a "
                                                "Triton file"), kernel_read["skipped"]
    assert any(note.startswith("line 67: NameError") for note in kernel_read["skipped"]), kernel_read["skipped"]
    assert kernel_read["triton"] == triton.__version__


@pytest.mark.parametrize("index", [0, 1, 2])
def test_each_configuration_compiles_as_its_own_description(kernel_read, tmp_path, index):
    config = kernel_read["configs"][index]
    desc = triton_autotune.with_config(described(), config)
    launch = resolve(desc, {}, H100_FIGURES, "job")
    assert launch.defines["BLOCK_M"] == config["kwargs"]["BLOCK_M"] and launch.block[0] == 32 * config["num_warps"]
    assert launch.grid(1000, 1003, 997)[0] == -(-1000 // config["kwargs"]["BLOCK_M"]) * -(-1003 // config["kwargs"]["BLOCK_N"])
    built = compiler.compile_launch(launch, "9.0", settings(tmp_path))
    entry = built.entry(launch.entry, launch.defines)
    assert entry["num_warps"] == config["num_warps"]
    kernel_args.load(built, launch, lambda symbol: symbol)  # its parameters fit the description's args


def test_a_file_whose_entry_is_missing_says_what_raised(tmp_path):
    broken = described(files={"matmul_script.py": (REPO / "matmul_script.py").read_text().replace(
        "@triton.autotune(configs=configs(),", "@triton.autotune(configs=configs(1),")})
    with pytest.raises(CompileRefused) as refused:
        triton_build.describe(resolve(broken, {}, H100_FIGURES, "job"), "9.0", settings(tmp_path))
    assert "grouped_matmul in matmul_script.py is not a @triton.jit function" in str(refused.value)
    assert "TypeError: configs() takes 0 positional arguments but 1 was given" in str(refused.value)


def test_a_triton_grid_may_read_its_configurations_names_a_cuda_grid_may_not():
    assert described().grid.x == "cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)"
    cuda = {"name": "k", "source": "k.cu", "files": {"k.cu": 'extern "C" __global__ void k() {}'}, "entry": "k",
            "block": [128], "grid": {"x": "cdiv(M, BLOCK_M)"}}
    with pytest.raises(ValueError, match="unknown name"):
        KernelDescription.model_validate(cuda)


# -- the choice ---------------------------------------------------------------------
CONFIGS = [{"kwargs": {"BLOCK_M": bm}, "num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
           for bm in (64, 128, 32)]
KEY = {"kernel": "k", "triton": "3.6.0", "gpu": "NVIDIA H200", "bucket": [1024, 1024, 1024]}


def timer(times: dict[int, float], seen: list):
    def time_config(desc: KernelDescription) -> float:
        seen.append(desc.defines["BLOCK_M"])
        if times[desc.defines["BLOCK_M"]] is None:
            raise RuntimeError("out of resources: shared memory")
        return times[desc.defines["BLOCK_M"]]
    return time_config


def test_the_fastest_configuration_is_chosen_and_kept(tmp_path):
    seen: list[int] = []
    index, how = triton_autotune.choose(described(), CONFIGS, timer({64: 2.0, 128: 1.5, 32: 3.0}, seen), tmp_path, KEY)
    assert index == 1 and seen == [64, 128, 32]
    assert how["chosen_by"].startswith("autotune here: 3 of 3")
    # The next case of the same kernel, bucket, GPU and release: the kept choice, nothing timed.
    again, how = triton_autotune.choose(described(), CONFIGS, timer({64: 0.1, 128: 9.0, 32: 9.0}, seen), tmp_path, KEY)
    assert again == 1 and seen == [64, 128, 32] and how["chosen_by"] == "an earlier autotune on this worker"


@pytest.mark.parametrize("changed", [{"triton": "3.7.0"}, {"gpu": "NVIDIA H100 80GB HBM3"},
                                     {"bucket": [2048, 1024, 1024]}, {"kernel": "k2"}])
def test_a_new_release_gpu_bucket_or_kernel_tunes_again(tmp_path, changed):
    triton_autotune.choose(described(), CONFIGS, timer({64: 2.0, 128: 1.5, 32: 3.0}, []), tmp_path, KEY)
    seen: list[int] = []
    index, _ = triton_autotune.choose(described(), CONFIGS, timer({64: 0.5, 128: 1.5, 32: 3.0}, seen), tmp_path,
                                      {**KEY, **changed})
    assert index == 0 and seen == [64, 128, 32]


def test_a_changed_list_of_configurations_tunes_again(tmp_path):
    triton_autotune.choose(described(), CONFIGS, timer({64: 2.0, 128: 1.5, 32: 3.0}, []), tmp_path, KEY)
    reordered = [CONFIGS[1], CONFIGS[0], CONFIGS[2]]
    index, how = triton_autotune.choose(described(), reordered, timer({64: 2.0, 128: 1.5, 32: 3.0}, []), tmp_path, KEY)
    assert index == 0 and how["chosen_by"].startswith("autotune here")


def test_a_configuration_that_cannot_run_is_said_and_passed_over(tmp_path):
    clustered = [*CONFIGS[:2], {**CONFIGS[2], "num_ctas": 2}]
    index, how = triton_autotune.choose(described(), clustered, timer({64: None, 128: 1.5, 32: 0.1}, []), tmp_path, KEY)
    assert index == 1
    assert "out of resources" in how["timed"][0]["error"] and how["not_run"] == [{"why": "num_ctas=2", "indices": [2]}]
    assert [t["index"] for t in how["timed"]] == [0, 1]
    with pytest.raises(ValueError, match="none of the 3 configurations"):
        triton_autotune.choose(described(), CONFIGS, timer({64: None, 128: None, 32: None}, []), None, KEY)
    with pytest.raises(ValueError, match="none of the 3 configurations .*: 0: .*out of resources.*; 1 not run: num_ctas=2"):
        triton_autotune.choose(described(), clustered, timer({64: None, 128: None, 32: 0.1}, []), None, KEY)


def test_configurations_passed_over_for_one_reason_are_said_once(tmp_path):
    """triton-lang/kernels has 320 split-K configurations with one pre_hook: one entry names them all, where a
    line each made 51 KB of a 56 KB env. A kept choice says the same."""
    hooked = [CONFIGS[0], *[{**CONFIGS[1], "pre_hook": True}] * 5, {**CONFIGS[2], "num_ctas": 2}]
    index, how = triton_autotune.choose(described(), hooked, timer({64: 2.0}, []), tmp_path, KEY)
    assert index == 0 and [t["index"] for t in how["timed"]] == [0]
    assert [(n["why"].split(" (")[0], n["indices"]) for n in how["not_run"]] == [("a pre_hook", [1, 2, 3, 4, 5]),
                                                                                ("num_ctas=2", [6])]
    again = triton_autotune.choose(described(), hooked, timer({}, []), tmp_path, KEY)
    assert again == (0, {**how, "chosen_by": "an earlier autotune on this worker"})


def test_a_configuration_with_a_pre_hook_runs_only_where_c_starts_zero(tmp_path):
    """A pre_hook is the job's Python before each launch (triton-lang/kernels' split-K configurations zero C
    with it): timed without it, such a configuration adds into an unzeroed C and could be chosen, then judged
    wrong. Passed over, said so; run where the description zeroes C itself."""
    hooked = [*CONFIGS[:2], {**CONFIGS[2], "pre_hook": True}]
    index, how = triton_autotune.choose(described(), hooked, timer({64: 2.0, 128: 1.5, 32: 0.1}, []), tmp_path, KEY)
    assert index == 1 and how["not_run"][0]["why"].startswith("a pre_hook") and how["not_run"][0]["indices"] == [2], how
    with pytest.raises(ValueError, match="has a pre_hook"):
        triton_autotune.choose(described(triton={"config": 2}), hooked, timer({}, []), tmp_path, KEY)
    zeroed = described(c_starts_zero=True)
    index, _ = triton_autotune.choose(zeroed, hooked, timer({64: 2.0, 128: 1.5, 32: 0.1}, []), tmp_path / "z", KEY)
    assert index == 2


def test_a_description_that_names_its_configuration_times_nothing(tmp_path):
    chosen = described(triton={"config": 2})
    index, how = triton_autotune.choose(chosen, CONFIGS, timer({}, []), tmp_path, KEY)
    assert index == 2 and how == {"chosen_by": "the description (triton.config)"}
    with pytest.raises(ValueError, match="lists 3 configurations"):
        triton_autotune.choose(described(triton={"config": 3}), CONFIGS, timer({}, []), tmp_path, KEY)


def test_a_profile_takes_only_a_kept_choice(tmp_path):
    with pytest.raises(ValueError, match="no @triton.autotune choice of grouped_matmul is kept"):
        triton_autotune.choose(described(), CONFIGS, None, tmp_path, KEY)
    triton_autotune.choose(described(), CONFIGS, timer({64: 2.0, 128: 1.5, 32: 3.0}, []), tmp_path, KEY)
    assert triton_autotune.choose(described(), CONFIGS, None, tmp_path, KEY)[0] == 1


def test_a_damaged_record_is_tuned_again(tmp_path):
    triton_autotune.choose(described(), CONFIGS, timer({64: 2.0, 128: 1.5, 32: 3.0}, []), tmp_path, KEY)
    (record,) = tmp_path.glob("*.json")
    record.write_text(json.dumps({"index": 2}))
    seen: list[int] = []
    assert triton_autotune.choose(described(), CONFIGS, timer({64: 2.0, 128: 1.5, 32: 3.0}, seen), tmp_path, KEY)[0] == 1
    assert seen == [64, 128, 32]


@pytest.mark.parametrize(("size", "bucket"), [((1024, 1024, 1024), [1024, 1024, 1024]),
                                              ((1000, 1003, 997), [1024, 1024, 1024]),
                                              ((1025, 64, 1), [2048, 64, 1])])
def test_the_bucket_rounds_each_dimension_up_to_a_power_of_two(size, bucket):
    assert triton_autotune.bucket(*size) == bucket


def test_an_autotuned_kernel_runs_through_the_stack(tmp_path, pg_url, redis_url, start_worker):
    """The fixture's file as it is, posted as a job: every configuration timed once for the first
    case's bucket, the fastest run and said on the result; the next case of that bucket reuses it."""
    from core.records.db import upgrade_database
    from tests.conftest import make_client, make_settings, wait_for_job

    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="300")
    client = make_client(cfg)
    source = described().model_dump(mode="json", exclude_none=True)
    resp = client.post("/api/jobs", json={"sources": [source], "sizes": [[96, 80, 64], [100, 90, 60]]})
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=600)
    first, second = sorted(job["results"], key=lambda r: r["m"])
    for result in (first, second):
        assert result["verified"], result["error"]
        chosen = result["env"]["triton"]["config"]
        assert result["env"]["launch"]["defines"]["BLOCK_M"] == chosen["kwargs"]["BLOCK_M"]
        assert result["env"]["launch"]["block"][0] == 32 * chosen["num_warps"]
        assert result["env"]["triton"]["version"] == triton.__version__
    # Whichever case ran first tuned; the other reused its choice.
    assert sorted(r["env"]["triton"]["chosen_by"] for r in (first, second)) == [
        "an earlier autotune on this worker", "autotune here: 3 of 3 configurations timed"]
    assert second["env"]["triton"]["config"] == first["env"]["triton"]["config"]


def test_a_case_is_compiled_as_tritons_own_launcher_would_specialize_it(tmp_path):
    """Triton's launcher compiles a kernel for its call: an integer 1 compiled in, pointers and sizes
    divisible by 16 marked so. gemmwatch does the same per case, else a unit stride and the
    alignment are unknown to the compiler and the kernel is not the one the repository runs."""
    from dataclasses import replace

    desc = triton_autotune.with_config(described(), CONFIGS_OF_FIXTURE[0])
    launch = resolve(desc, {}, H100_FIGURES, "job")
    values = kernel_args.named_values(launch, 1024, 1000, 512, None, None, None, 1.0, 0.0)
    spec = triton_build.specialization(launch, values)
    # A B C M N K lda =1 ldb =1 ldc =1: pointers aligned, N = 1000 not a multiple of 16, the unit strides 1.
    assert spec == ("D", "D", "D", "D", "", "D", "D", "1", "", "1", "", "1")
    cfg = settings(tmp_path)
    plain = compiler.compile_launch(launch, "9.0", cfg)
    special = compiler.compile_launch(replace(launch, specialization=spec), "9.0", cfg)
    entry, special_entry = plain.entry(launch.entry, launch.defines), special.entry(launch.entry, launch.defines)
    assert special_entry["kept"] == [0, 1, 2, 3, 4, 5, 6, 8, 10]  # the three unit strides compiled in
    assert len(entry["params"]) - len(special_entry["params"]) == 3
    assert plain.cubin_path.read_bytes() != special.cubin_path.read_bytes()
    loaded = kernel_args.load(special, replace(launch, specialization=spec), lambda symbol: symbol)
    assert [role for role, _ in loaded.plan.passing[:9]] == ["A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc"]


CONFIGS_OF_FIXTURE = [{"kwargs": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, "num_warps": 4,
                       "num_stages": 3, "num_ctas": 1, "maxnreg": None}]


def test_one_file_in_two_precisions_is_two_loaded_kernels():
    """A device keeps loaded kernels by kernel_args.loaded_key: the same Triton file described in FP16
    and in FP8 must not share one (the FP8 case once launched the FP16 cubin over E4M3 bytes: NaN,
    then an illegal address). Warps, stages and the case's specialization are part of it too."""
    from dataclasses import replace

    fp16 = resolve(described(), {}, H100_FIGURES, "job")
    fp8 = resolve(described(compute_mode="fp8", layout={"A": "row", "B": "col", "C": "row"},
                            args=["A", "B", "C", "M", "N", "K", "lda", "=1", "=1", "ldb", "ldc", "=1"]),
                  {}, H100_FIGURES, "job")
    assert kernel_args.loaded_key(fp16) != kernel_args.loaded_key(replace(fp16, compute_mode="fp8"))
    assert kernel_args.loaded_key(fp16) != kernel_args.loaded_key(replace(fp16, output="fp32"))
    assert kernel_args.loaded_key(fp16) != kernel_args.loaded_key(replace(fp16, num_stages=2))
    assert kernel_args.loaded_key(fp16) != kernel_args.loaded_key(replace(fp16, specialization=("D",) * 12))
    assert triton_build.types(fp8)[:3] == ["*fp8e4nv", "*fp8e4nv", "*bf16"]

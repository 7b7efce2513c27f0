"""Issue 51: a result's `env` has a versioned schema, as nvbench's JSON has one. docs/schemas/result-env-1.json
is the JSON Schema of the record as the server stores and returns it; this keeps the file equal to the
model (core/results/result_env.py) and checks real records against it: the H100 and H200 workers' envs
of the demo's figures (cli/demo_figures/), and an imported nvbench result's."""

import copy
import glob
import json

import jsonschema
import pytest

from core.results.result_env import ENV_SCHEMA_ID, ResultEnv, env_json_schema
from tests.conftest import ROOT, make_client
from tests.test_imports import nvbench_body

SCHEMA_FILE = ROOT / "docs" / "schemas" / "result-env-1.json"


def validator():
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def worker_envs() -> list[dict]:
    """Every result's env of the demo's real jobs, stored as the server stores a posted one."""
    found = []
    for path in sorted(glob.glob(str(ROOT / "cli" / "demo_figures" / "*" / "*.json"))):
        found += [ResultEnv.model_validate(r["env"]).stored() for r in json.loads(open(path).read())["results"]]
    return found


def test_the_schema_file_is_the_env_model_s_own():
    assert json.loads(SCHEMA_FILE.read_text()) == env_json_schema()
    assert env_json_schema()["$id"] == ENV_SCHEMA_ID == "gemmwatch.result-env/1"


def test_real_worker_envs_fit_version_1_and_a_misread_value_does_not():
    check = validator()
    envs = worker_envs()
    assert len(envs) > 100 and any("resources" in e and "cublas_stats" in e for e in envs)
    for env in envs:
        check.validate(env)
    spoiled = copy.deepcopy(next(e for e in envs if "peak" in e))
    spoiled["peak"]["tflops"] = "989 TFLOPS"  # a unit in the value: what a reader of version 1 cannot read
    with pytest.raises(jsonschema.ValidationError):
        check.validate(spoiled)
    renamed = copy.deepcopy(envs[0]) | {"cublas_statistics": envs[0].get("cublas_stats")}
    with pytest.raises(jsonschema.ValidationError):  # a renamed key is a new version, not a silent one
        check.validate(renamed)


def test_a_result_names_its_env_schema_and_an_imported_env_fits_it(cfg):
    client = make_client(cfg)
    job = client.post("/api/imports", json=nvbench_body("base", "aaaa0001", [])).json()
    result = client.get("/api/jobs/" + str(job["job_id"])).json()["results"][0]
    detail = client.get(f"/api/results/{result['id']}").json()
    assert detail["env_schema"] == "gemmwatch.result-env/1"
    validator().validate(detail["env"])
    assert detail["env"]["imported"]["tool"] == "nvbench"


def test_a_kernel_that_writes_c_by_its_map_keeps_its_launch_record():
    """env.launch.tensor_maps as the runner writes it (worker/measure/runner.py), for a kernel whose C goes
    out by TMA stores through C_map: the model and the schema file take the C map as they take A's and B's,
    so such a result is posted and exported whole."""
    from core.description.kernel import resolve
    from core.description.kernel_description import KernelDescription
    from tests.descriptions import one_file
    from tests.fake_gpu import H100_FIGURES

    desc = KernelDescription.model_validate(one_file(
        "k", 'extern "C" __global__ void k(int M, int N, int K, float alpha, const float* A, const float* B, '
             'const void* C_map) {}', "k", [256], [64, 64], args=["M", "N", "K", "alpha", "A", "B", "C_map"],
        tensor_maps={"C": {"box": [64, 64]}}))
    launch = resolve(desc, {}, H100_FIGURES)
    env = {"launch": {"entry": launch.entry, "tensor_maps": {x: list(b) for x, b in launch.tensor_maps.items()}}}
    stored = ResultEnv.model_validate(env).stored()
    assert stored["launch"]["tensor_maps"] == {"C": [64, 64, 0]}
    validator().validate(stored)


@pytest.mark.parametrize("variant", ["smem_tiled", "tf32_mma_sync", "tail_split_k"])
def test_every_key_the_runner_writes_is_one_the_schema_declares(variant):
    """The runner's launch record (compiler, flags, each parameter as the binary declares it) went to
    `extra`, shown nowhere, because the model did not name it; a GPU test found it, and this finds it
    without a GPU: the runner's own record of a case, checked by the model the API stores it with."""
    from tests.fake_gpu import CpuRunner
    from core.settings import Settings
    from worker.measure.cases import TimingPolicy, builtin_case

    out = CpuRunner().run_case(builtin_case(variant, 64, 64, 64),
                               TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0)))
    assert out.env.get("launch"), out.error  # else there is nothing to check
    env = ResultEnv.model_validate(out.env)
    assert env.extra == {}
    assert env.launch.params and env.launch.compiler == "nvrtc"

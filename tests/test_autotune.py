"""Autotune jobs sweep every tunable combination; the fastest verified one becomes the default."""

import pytest

from core.records.db import upgrade_database
from core.description.builtins import builtin_kernels
from tests.conftest import make_client, make_settings, wait_for_job


def configurations(name: str) -> list[dict]:
    return builtin_kernels()[name].configurations()


def test_configurations_cover_the_product_with_the_default_first():
    spec = builtin_kernels()["naive"]
    configs = spec.configurations()
    assert configs[0] == spec.defaults()
    assert sorted(c["BLOCK"] for c in configs) == sorted(spec.tunables["BLOCK"].values)
    assert builtin_kernels()["smem_block_tile"].configurations()[0] == {"BK": 8}
    assert builtin_kernels()["guide_smem_submatrix_16"].configurations() == [{}]


def test_autotune_then_bench_uses_the_best_configuration(tmp_path, pg_url, redis_url, start_worker):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    client = make_client(cfg)
    start_worker(cfg)

    sizes = [[32, 32, 32], [16, 24, 8]]
    resp = client.post("/api/jobs", json={"kind": "autotune", "variants": ["naive", "smem_tiled"], "sizes": sizes})
    assert resp.status_code == 202, resp.text
    n_configs = len(configurations("naive")) + len(configurations("smem_tiled"))
    assert resp.json()["progress"]["total"] == n_configs * len(sizes)
    job = wait_for_job(client, resp.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    tried = {(r["variant"], r["m"], tuple(sorted(r["tunables"].items()))) for r in job["results"]}
    assert len(tried) == n_configs * len(sizes)  # every combination ran once

    tuned = client.get("/api/tuned", params={"gpu": "FAKE"}).json()
    assert len(tuned) == 4  # 2 variants x 2 sizes
    for t in tuned:
        candidates = [r for r in job["results"] if (r["variant"], r["m"], r["n"], r["k"]) == (t["variant"], t["m"], t["n"], t["k"])]
        best = max(candidates, key=lambda r: r["gflops"])
        assert t["tunables"] == best["tunables"] and t["gflops"] == pytest.approx(best["gflops"])

    bench = wait_for_job(client, client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[32, 32, 32]]}).json()["id"])
    expected = next(t for t in tuned if t["variant"] == "naive" and t["m"] == 32)["tunables"]
    assert bench["results"][0]["tunables"] == expected

    forced = {"naive": {"BLOCK": 8}}
    pinned = wait_for_job(client, client.post("/api/jobs", json={"variants": ["naive"], "sizes": [[32, 32, 32]], "tunables": forced}).json()["id"])
    assert pinned["results"][0]["tunables"] == {"BLOCK": 8}


@pytest.mark.parametrize("body, words", [
    ({"variants": ["naive"], "sizes": [[8, 8, 8]], "tunables": {"naive": {"BLOCK": 7}}}, ["BLOCK=7 not allowed", "[8, 16, 32]"]),
    ({"variants": ["naive"], "sizes": [[8, 8, 8]], "tunables": {"naive": {"WARP": 1}}}, ["no tunable 'WARP'"]),
    ({"variants": ["naive"], "sizes": [[8, 8, 8]], "tunables": {"smem_tiled": {"TILE": 8}}}, ["not among the job's variants"]),
    ({"kind": "autotune", "variants": ["naive"], "sizes": [[8, 8, 8]], "tunables": {"naive": {"BLOCK": 8}}}, ["sweeps every tunable"]),
    ({"kind": "tune", "variants": ["naive"], "sizes": [[8, 8, 8]]}, ["'bench' or 'autotune'"]),
    ({"kind": "autotune", "variants": ["naive"], "sizes": [[8, 8, 8]] * 100}, ["1 variants x 100 sizes", "at most 64"]),
    ({"kind": "autotune", "variants": ["naive"], "sizes": [[8, 8, 8]] * 50}, ["150 cases", "at most 128"]),
])
def test_bad_tunables_are_422(client, body, words):
    resp = client.post("/api/jobs", json=body)
    assert resp.status_code == 422, resp.text
    text = " ".join(d["msg"] for d in resp.json()["detail"])
    for word in words:
        assert word in text, text

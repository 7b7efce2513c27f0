"""The wire contract: accepted jobs, and bad input that gets a clear 422 and stores nothing."""

import pytest
from sqlalchemy import func, select

from core.records.db import session_factory
from core.records.models import Commit, Job

GOOD = {"variants": ["naive", "smem_tiled"], "sizes": [[4096, 4096, 4096]]}


def jobs_stored(cfg) -> int:
    with session_factory(cfg)() as db:
        return db.scalar(select(func.count()).select_from(Job))


def test_post_job_returns_202_with_the_job(client, cfg):
    body = {**GOOD, "gpu": "H100", "commit": {"sha": "abcdef1234", "repo": "me/kernels", "branch": "main"}}
    resp = client.post("/api/jobs", json=body)
    assert resp.status_code == 202
    job = resp.json()
    assert job["status"] == "queued" and job["progress"] == {"done": 0, "total": 2}
    assert job["queue"] == "gpu.H100" and job["gpu"] == "H100"
    assert job["commit"]["sha"] == "abcdef1234" and job["results"] == []
    again = client.get(f"/api/jobs/{job['id']}").json()
    assert again["id"] == job["id"] and again["status"] == "queued"
    assert [j["id"] for j in client.get("/api/jobs").json()] == [job["id"]]


SKINNY = [[16, 4096, 4096], [4096, 16, 4096], [64, 8192, 8192], [8192, 8192, 64]]


def test_skinny_shapes_are_jobs_like_any_other(client, cfg):
    # A side past GEMMWATCH_MAX_DIM (16384 here) is taken while no matrix outgrows its square:
    # cute-gemm's own runner benchmarks 81920 x 256 x 256.
    sizes = SKINNY + [[81920, 256, 256], [256, 256, 1 << 20]]
    resp = client.post("/api/jobs", json={"variants": ["naive"], "sizes": sizes})
    assert resp.status_code == 202, resp.text
    job = resp.json()
    assert job["sizes"] == sizes and job["progress"]["total"] == 6  # as asked, in the order asked


def test_results_filter_tells_skinny_shapes_apart(client, cfg):
    from tests.fake_results import add_result

    for i, (m, n, k) in enumerate(SKINNY):
        add_result(cfg, "naive", (m, n, k), "aaaa01", gflops=100.0 + i)
    got = client.get("/api/results", params={"m": 4096, "n": 16}).json()
    assert [(r["m"], r["n"], r["k"], r["gflops"]) for r in got] == [(4096, 16, 4096, 101.0)]
    got = client.get("/api/results", params={"n": 8192, "k": 8192}).json()
    assert [(r["m"], r["gflops"]) for r in got] == [(64, 102.0)]


def test_the_same_commit_is_stored_once(client, cfg):
    for _ in range(2):
        client.post("/api/jobs", json={**GOOD, "commit": {"sha": "abcdef1234", "repo": "r"}})
    with session_factory(cfg)() as db:
        assert db.scalar(select(func.count()).select_from(Commit)) == 1


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({**GOOD, "variants": ["warp_magic"]}, "variants", ["warp_magic", "known variants", "naive", "smem_tiled", "cublas"]),
        ({**GOOD, "variants": []}, "body", ["'variants' is empty"]),
        ({**GOOD, "variants": ["naive", "naive"]}, "variants", ["once"]),
        ({**GOOD, "sizes": [[0, 16, 16]]}, "sizes", ["at least 1"]),
        ({**GOOD, "sizes": [[32768, 8193, 16]]}, "sizes", ["largest matrix holds 268468224 elements",
                                                           "at most 268435456", "GEMMWATCH_MAX_DIM"]),
        ({**GOOD, "sizes": [[4096, 4096, 16, 65535]]}, "sizes", ["batch x its largest matrix"]),
        ({**GOOD, "sizes": [[(1 << 20) + 1, 16, 16]]}, "sizes", ["1..1048576"]),
        ({**GOOD, "sizes": [[16, 16]]}, "sizes", ["[M, N, K]"]),
        ({**GOOD, "sizes": [["a", 1, 1]]}, "sizes", ["integer"]),
        ({**GOOD, "sizes": [[8, 8, 8]] * 33}, "body", ["66 cases", "at most 64"]),
        ({**GOOD, "gpu": "H100; drop table"}, "gpu", ["pattern"]),
        ({**GOOD, "commit": {"sha": "not-hex!"}}, "sha", ["pattern"]),
        ({**GOOD, "colour": "red"}, "colour", ["Extra inputs"]),
        ({"sizes": [[8, 8, 8]]}, "body", ["'variants' is empty"]),
    ],
)
def test_bad_job_is_422_naming_the_field_and_stores_nothing(client, cfg, body, field, words):
    resp = client.post("/api/jobs", json=body)
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert any(field in [str(p) for p in d["loc"]] for d in detail), detail
    text = " ".join(d["msg"] for d in detail)
    for word in words:
        assert word in text, text
    assert jobs_stored(cfg) == 0


def test_text_the_database_cannot_hold_is_422_not_500(client, cfg):
    body = {**GOOD, "commit": {"sha": "abcd", "message": "a\u0000b"}}
    resp = client.post("/api/jobs", json=body)
    # PostgreSQL cannot store NUL in text; refused at the door on every database (core/wire_types.py).
    assert resp.status_code == 422 and "NUL" in resp.json()["detail"][0]["msg"] and jobs_stored(cfg) == 0
    assert client.get("/api/results", params={"variant": "a\x00b"}).status_code in (200, 422)


def test_malformed_json_is_422_not_500(client, cfg):
    resp = client.post("/api/jobs", content=b"{not json", headers={"content-type": "application/json"})
    assert resp.status_code == 422
    assert jobs_stored(cfg) == 0


@pytest.mark.parametrize("path, code", [
    ("/api/jobs/999", 404), ("/api/jobs/0", 422), ("/api/jobs/99999999999999999999", 422), ("/api/jobs/abc", 422),
    ("/api/results?m=abc", 422), ("/api/results?limit=0", 422), ("/api/jobs?status=exploded", 422),
])
def test_bad_reads_are_4xx(client, path, code):
    assert client.get(path).status_code == code


def test_variants_list_names_techniques_seeds_and_tunables(client):
    variants = {v["name"]: v for v in client.get("/api/variants").json()}
    assert {"cublas", "naive", "smem_tiled"} <= set(variants)
    assert variants["smem_tiled"]["seed"] == "000_3aaa2eae4ca2accc.txt"
    assert variants["smem_tiled"]["tunables"] == [{"name": "TILE", "values": [8, 16, 32], "default": 32}]


def test_healthz_and_openapi(client):
    assert client.get("/healthz").json() == {"status": "ok", "database": "ok"}
    spec = client.get("/openapi.json").json()
    assert {"/api/jobs", "/api/jobs/{job_id}", "/api/results", "/api/variants", "/api/gpus", "/healthz"} <= set(spec["paths"])
    assert client.get("/docs").status_code == 200


def test_results_filter(client, cfg):
    from tests.fake_results import add_result

    add_result(cfg, "naive", (64, 64, 64), "aaaa01", gflops=100.0)
    add_result(cfg, "smem_tiled", (64, 64, 64), "aaaa01", gflops=150.0)
    add_result(cfg, "naive", (128, 128, 128), "bbbb02", gflops=120.0)
    got = client.get("/api/results", params={"variant": "naive"}).json()
    assert sorted(r["m"] for r in got) == [64, 128]
    got = client.get("/api/results", params={"sha": "bbbb", "gpu": "H100"}).json()
    assert [(r["variant"], r["commit"], r["gpu"]) for r in got] == [("naive", "bbbb02", "NVIDIA H100 80GB HBM3")]
    assert client.get("/api/results", params={"gpu": "A100"}).json() == []
    assert len(client.get("/api/results", params={"limit": 2}).json()) == 2

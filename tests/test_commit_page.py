"""A page per commit (/commits/{sha}, issue 24): every result of the commit on every GPU against its
base, regressions and confirmations first, its exports, its empty states, and the CI summary's
links to its rows. The browser's view of it is in tests/test_browser.py."""

import csv
import io

import pytest

from cli.ci import summary
from core.verdicts.baselines import result_anchor
from core.records.db import session_factory
from core.records.models import Job, Result
from tests.conftest import make_client
from tests.fake_results import (A100, DEMO_COMMITS, H100, LADDER, REGRESSION_AT, CUBLAS, add_demo_history, add_job,
                                demo_sha)


@pytest.fixture
def demo(cfg):
    add_demo_history(cfg)
    return make_client(cfg)


def rows(client, sha: str) -> dict:
    resp = client.get(f"/commits/{sha}", params={"format": "json"})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_every_result_of_the_commit_on_every_gpu_regressions_first(demo):
    got = rows(demo, demo_sha(REGRESSION_AT))
    per_gpu = len(LADDER) * len(CUBLAS[H100["model"]])
    assert len(got["rows"]) == 2 * per_gpu and {r["gpu"] for r in got["rows"]} == {"H100", "A100"}
    # warp_tile lost 9 % on the H100 at this commit, at each of its three sizes: those three first.
    first = got["rows"][:3]
    assert all(r["status"] == "regression" and r["variant"] == "warp_tile" and r["gpu"] == "H100" for r in first)
    assert all(r["delta"] < -0.05 for r in first)
    assert not any(r["status"] == "regression" for r in got["rows"][3:])
    # The same verdicts the CI hook reads from the API, row for row.
    for job_id in {r["job_id"] for r in got["rows"]}:
        api = {(v["variant"], v["m"]): v["status"] for v in demo.get(f"/api/jobs/{job_id}/verdicts").json()}
        assert api == {(r["variant"], r["m"]): r["status"] for r in got["rows"] if r["job_id"] == job_id}


def test_a_commit_before_the_regression_reads_ok_and_the_csv_holds_the_same_rows(demo):
    sha = demo_sha(REGRESSION_AT - 1)
    got = rows(demo, sha)
    assert got["rows"] and not any(r["status"] == "regression" for r in got["rows"])
    table = list(csv.DictReader(io.StringIO(demo.get(f"/commits/{sha}", params={"format": "csv"}).text)))
    assert [(r["variant"], r["gpu"], int(r["m"])) for r in table] == [(r["variant"], r["gpu"], r["m"]) for r in got["rows"]]


def test_a_prefix_finds_the_commit_and_a_short_or_unknown_one_says_why(demo):
    sha = demo_sha(DEMO_COMMITS - 1)
    assert rows(demo, sha[:7])["filters"]["sha"] == sha
    assert rows(demo, sha.upper())["filters"]["sha"] == sha
    short = rows(demo, sha[:5])
    assert short["rows"] == [] and "7 digits" in short["reason"]
    unknown = demo.get("/commits/0123456789abcdef")
    assert unknown.status_code == 200 and "No commit 0123456789abcdef has been measured" in unknown.text
    assert demo.get("/commits/not-hex").status_code == 422


def test_an_ambiguous_prefix_names_the_commits(cfg):
    add_job(cfg, "abcdef1000", [("naive", (64, 64, 64), 100.0, True)])
    add_job(cfg, "abcdef1999", [("naive", (64, 64, 64), 100.0, True)])
    got = rows(make_client(cfg), "abcdef1")
    assert got["rows"] == [] and "names 2 commits" in got["reason"] and "abcdef1999" in got["reason"]


def test_a_commit_whose_job_waits_says_so(cfg):
    add_job(cfg, "feed0042", [], status="queued", total=3)
    client = make_client(cfg)
    got = rows(client, "feed0042")
    assert got["rows"] == [] and "No results for feed0042 yet: job #1 queued" in got["reason"]
    page = client.get("/commits/feed0042").text
    assert 'href="/jobs/1"' in page
    assert page.count("job #1") == 1  # said once, linked (the reason repeated it beside the note)


def test_a_confirmation_decides_its_rows_and_comes_first(demo, cfg):
    """A same-job A/B job for the regressed commit that finds no change: its rows say so, beside
    what the history said, and sort before the plain ones."""
    sha = demo_sha(REGRESSION_AT)
    with session_factory(cfg)() as db:
        head = db.query(Job).filter(Job.commit.has(sha=sha), Job.gpu.has(model="H100")).one()
        regressed = [r for r in head.results if r.variant == "warp_tile"]
        # As core/verdicts/confirm.py plan_confirmation makes it: two commits measured, so no commit of its own.
        confirm = Job(kind="confirm", status="succeeded", variants=["warp_tile"], sizes=[[1024] * 3], queue="gpu.H100",
                      commit_id=None, gpu_id=head.gpu_id, confirm={"head_job": head.id, "head_sha": sha,
                                                                 "base_sha": demo_sha(REGRESSION_AT - 1)})
        db.add(confirm)
        db.flush()
        r = regressed[0]
        same = [1.0 + 0.001 * (i % 5) for i in range(40)]
        db.add(Result(job_id=confirm.id, case_index=0, variant=r.variant, m=r.m, n=r.n, k=r.k, gpu_id=r.gpu_id,
                      commit_id=None, mode="ab", verified=True, gflops=r.gflops, median_ms=1.0, samples_ms=same,
                      env={"ab": {"base_ms": same, "base_gflops": r.gflops}}))
        db.commit()
        size = r.m
    got = rows(demo, sha)["rows"]
    confirmed = [x for x in got if x["confirmed"]]
    assert len(confirmed) == 1 and confirmed[0]["m"] == size and confirmed[0]["confirmed"] == "no change"
    assert confirmed[0]["status"] == "ok" and 0.99 < confirmed[0]["ratio"] < 1.01
    assert [x["status"] for x in got[:2]] == ["regression", "regression"]  # the two it did not take
    assert got.index(confirmed[0]) < next(i for i, x in enumerate(got) if x["status"] == "ok" and not x["confirmed"])
    html = demo.get(f"/commits/{sha}").text
    assert "no change · 1.0000" in html  # identical samples on both sides: a ratio of exactly 1
    assert "(history said regression)" in html


def test_the_ci_summary_links_each_row_to_its_row_on_the_commit_page(demo):
    sha = demo_sha(REGRESSION_AT)
    job_id = rows(demo, sha)["rows"][0]["job_id"]
    job = {"id": job_id, "status": "succeeded", "commit": {"sha": sha}, "queue": "gpu.H100", "ran_on": "H100"}
    verdicts = demo.get(f"/api/jobs/{job_id}/verdicts").json()
    page = f"http://gw.example/commits/{sha}"
    text = summary(job, verdicts, "base", page=page)
    assert f"Every result of this commit, on every GPU: {page}" in text
    html = demo.get(f"/commits/{sha}").text
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and "×" in line]
    assert len(table_rows) == len(verdicts)
    for v, line in zip(verdicts, table_rows):
        anchor = result_anchor(job_id, v["variant"], v["m"], v["n"], v["k"])
        assert line.endswith(f"({page}#{anchor}) |")
        assert f'id="{anchor}"' in html  # the link lands on that result's row
    assert "commit page" not in summary(job, verdicts, "base")  # no server, no links


def test_anchors_are_html_ids_whatever_the_variant_is_called():
    assert result_anchor(7, "my kernel<1>", 1, 2, 3) == "r-7-my_kernel_1_-1x2x3"
    assert result_anchor(7, "a", 1, 2, 3) != result_anchor(8, "a", 1, 2, 3)


def test_an_a100_only_commit_is_a_commit_too(cfg):
    add_job(cfg, "a100a100", [("naive", (64, 64, 64), 100.0, True), ("smem_tiled", (64, 64, 64), 1.0, False)], gpu=A100)
    got = rows(make_client(cfg), "a100a100")["rows"]
    assert [r["status"] for r in got] == ["unverified", "no baseline"] and {r["gpu"] for r in got} == {"A100"}

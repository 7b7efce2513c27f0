"""History by git ancestry: a rebased commit with an earlier date but a later place in the
first-parent chain is drawn after its parent and judged against its ancestors; a commit left
behind by a force-push is no part of the baseline."""

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from core.verdicts.ancestry import ordered
from core.records.db import session_factory
from core.records.models import Commit
from tests.fake_results import add_result
from tests.test_dashboard import traces

SIZE = (2048, 2048, 2048)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_ordered_puts_every_commit_after_its_parents_whatever_the_dates():
    t = [T0 + timedelta(hours=h) for h in range(5)]
    rows = [(1, "a", [], t[1]), (2, "b", ["a"], t[2]), (3, "rebased", ["b"], t[0]), (4, "other", None, t[3]),
            (5, "merge", ["rebased", "other"], t[4])]
    assert ordered(rows) == [1, 2, 3, 4, 5]  # "rebased" is dated first, yet follows b
    assert ordered([(1, "x", ["y"], t[1]), (2, "y", ["x"], t[0])]) == [2, 1]  # a hand-made cycle loses nothing
    assert ordered([]) == []


def _link(cfg, parents: dict[str, list[str]]):
    with session_factory(cfg)() as db:
        for sha, ps in parents.items():
            c = db.scalar(select(Commit).where(Commit.sha == sha))
            c.parents, c.branch = ps, "main"
        db.commit()


def test_a_rewritten_branch_keeps_chart_and_baseline_in_ancestry_order(client, cfg):
    # main: m1 -> m2 -> m3 at hours 10..12, 1000 GFLOPS each. x (hour 11.5, 500 GFLOPS) was on
    # main until a force-push dropped it. f1 was written at hour 5, 3 % slower, and rebased onto m3.
    for sha, hour, g in (("aaaa0001", 10, 1000.0), ("aaaa0002", 11, 1000.0), ("aaaa0003", 12, 1000.0),
                         ("dead0001", 11.5, 500.0)):
        add_result(cfg, "warp_tile", SIZE, sha, gflops=g, commit_index=hour, noise=0.001)
    head_job = add_result(cfg, "warp_tile", SIZE, "ffff0001", gflops=970.0, commit_index=5, noise=0.001)
    _link(cfg, {"aaaa0001": [], "aaaa0002": ["aaaa0001"], "aaaa0003": ["aaaa0002"], "dead0001": ["aaaa0001"],
                "ffff0001": ["aaaa0003"]})

    drawn = traces(client.get("/history?gpu=H100&size=2048&mode=cold").text)["warp_tile"]["x"]
    assert drawn.index("ffff0001") > drawn.index("aaaa0003") > drawn.index("aaaa0002") > drawn.index("aaaa0001")
    assert drawn[-1] == "ffff0001"  # by date it would come first

    for params in ({}, {"base": "aaaa0003"}):
        (v,) = client.get(f"/api/jobs/{head_job}/verdicts", params=params).json()
        assert v["baseline_points"] == 3 and v["baseline_mean"] == pytest.approx(1000.0), (params, v)
        assert v["delta"] == pytest.approx(-0.03) and v["status"] == "regression"

    # The base's own history follows its first parents too: m2's baseline is m2 and m1, not x.
    (v,) = client.get(f"/api/jobs/{head_job}/verdicts", params={"base": "aaaa0002"}).json()
    assert v["baseline_points"] == 2 and v["baseline_mean"] == pytest.approx(1000.0)


def test_another_repositorys_commits_are_no_baseline_even_on_a_branch_of_the_same_name(client, cfg):
    """A fork's history (repository "fork", branch main, 1000 GFLOPS) and this repository's head on
    its own main at 500: the head has no baseline, by branch, by ancestry or by a base sha that
    only the fork has."""
    for i in range(5):
        add_result(cfg, "warp_tile", SIZE, f"f0f0000{i}", gflops=1000.0, commit_index=i, noise=0.001)
    head_job = add_result(cfg, "warp_tile", SIZE, "abab0001", gflops=500.0, commit_index=9, noise=0.001)
    with session_factory(cfg)() as db:
        for c in db.scalars(select(Commit)):
            c.branch, c.repo = "main", "fork" if c.sha.startswith("f0f0") else "origin"
        db.scalar(select(Commit).where(Commit.sha == "f0f00001")).parents = ["f0f00000"]
        db.commit()

    for params in ({}, {"base": "f0f0"}, {"base": "f0f00001"}, {"base_branch": "main"}):
        (v,) = client.get(f"/api/jobs/{head_job}/verdicts", params=params).json()
        assert v["baseline_points"] == 0 and v["status"] != "regression", (params, v)

    _link(cfg, {"abab0001": ["f0f00004"]})  # a parent sha that is only the fork's
    with session_factory(cfg)() as db:
        db.scalar(select(Commit).where(Commit.sha == "abab0001")).repo = "origin"
        db.commit()
    (v,) = client.get(f"/api/jobs/{head_job}/verdicts").json()
    assert v["baseline_points"] == 0, v

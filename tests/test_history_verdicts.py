"""One history, one verdict: the dashboard's history chart and the CI's verdicts read a result's
noise the same way (core/verdicts/baselines.py robust_noise: from the quartiles, which one outlier sample
barely moves). Before, the chart used stddev/mean: the demo's 3.6 % bf16_wgmma regression on the
H100 was flagged by `gemmwatch ci` and drawn as within its threshold on the history page."""

import pytest
from sqlalchemy import select, update

from core.records.db import session_factory
from core.records.models import Result
from tests.fake_results import add_result

SIZE = (4096, 4096, 4096)


def test_the_history_chart_flags_what_the_verdicts_flag(client, cfg):
    # stddev/mean 1 % on every result (an outlier sample each), quartiles 0.2 % apart.
    for i, sha in enumerate(("aaaa0001", "aaaa0002")):
        add_result(cfg, "bf16_wgmma", SIZE, sha, gflops=1000.0, commit_index=i, noise=0.01)
    head = add_result(cfg, "bf16_wgmma", SIZE, "aaaa0003", gflops=964.0, commit_index=2, noise=0.01)
    with session_factory(cfg)() as db:
        for r in db.scalars(select(Result)):
            db.execute(update(Result).where(Result.id == r.id).values(q1_ms=r.median_ms * 0.999, q3_ms=r.median_ms * 1.001))
        db.commit()

    (verdict,) = client.get(f"/api/jobs/{head}/verdicts").json()
    assert verdict["status"] == "regression" and verdict["delta"] == pytest.approx(-0.036), verdict
    rows = client.get("/history", params={"gpu": "H100", "size": "4096", "mode": "cold", "format": "json"}).json()["rows"]
    drawn = {r["sha"]: r for r in rows if r["variant"] == "bf16_wgmma"}
    assert drawn["aaaa0003"]["regression"] is True, drawn["aaaa0003"]["regression_reason"]
    assert drawn["aaaa0003"]["noise"] == pytest.approx(0.002 / 1.349, rel=0.01)  # the quartiles', not stddev's

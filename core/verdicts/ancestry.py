"""Commit order by git ancestry: the CI hook sends each commit's parents (`git rev-parse HEAD^@`).

History, baselines and "the previous result" follow the first-parent chain, which a rebase or a
force-push cannot scramble the way it scrambles commit dates (a rebased commit keeps its author
date, earlier than the commits it now follows). Commit time is the fallback, only where a commit
came without parents.
"""

import heapq
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.records.models import Commit

COMMIT_TIME = func.coalesce(Commit.committed_at, Commit.created_at)


def commit_time(c: Commit) -> datetime:
    return c.committed_at or c.created_at


def first_parent(db: Session, c: Commit) -> Commit | None:
    if not c.parents:
        return None
    return db.scalar(select(Commit).where(Commit.repo == c.repo, Commit.sha == c.parents[0]))


def by_time_before(db: Session, c: Commit, limit: int) -> list[Commit]:
    """The fallback: commits of c's branch dated no later than c, newest first."""
    if not c.branch:
        return []
    return list(db.scalars(
        select(Commit).where(Commit.repo == c.repo, Commit.branch == c.branch, Commit.id != c.id,
                             COMMIT_TIME <= commit_time(c))
        .order_by(COMMIT_TIME.desc(), Commit.id.desc()).limit(limit)
    ))


def chain(db: Session, start: Commit, limit: int) -> list[Commit]:
    """start and its first-parent ancestors, newest first, at most `limit`. Where a commit has no
    parents recorded, the walk goes on by commit time on its branch."""
    out: list[Commit] = []
    seen: set[int] = set()
    c: Commit | None = start
    while c is not None and len(out) < limit and c.id not in seen:
        out.append(c)
        seen.add(c.id)
        if c.parents is None:
            out += [p for p in by_time_before(db, c, limit - len(out)) if p.id not in seen]
            break
        c = first_parent(db, c)
    return out


def ordered(commits: Iterable[tuple[int, str, list[str] | None, datetime]]) -> list[int]:
    """Commit ids, oldest first, every commit after its parents in the set; among commits the
    ancestry does not order (other branches, no parents sent), the older date first.
    Rows are (id, sha, parents, time)."""
    rows = list(commits)
    index = {sha: i for i, (_, sha, _, _) in enumerate(rows)}
    waiting = [0] * len(rows)
    children: list[list[int]] = [[] for _ in rows]
    for i, (_, _, parents, _) in enumerate(rows):
        for p in set(parents or ()):
            if p in index and index[p] != i:
                waiting[i] += 1
                children[index[p]].append(i)
    ready = [(rows[i][3], rows[i][0], i) for i in range(len(rows)) if waiting[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, commit_id, i = heapq.heappop(ready)
        out.append(commit_id)
        for ch in children[i]:
            waiting[ch] -= 1
            if waiting[ch] == 0:
                heapq.heappush(ready, (rows[ch][3], rows[ch][0], ch))
    if len(out) < len(rows):  # a cycle cannot come from git; from a hand-made post, keep every commit
        done = set(out)
        out += [r[0] for r in sorted(rows, key=lambda r: (r[3], r[0])) if r[0] not in done]
    return out

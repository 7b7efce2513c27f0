"""One commit as a whole (`/commits/{sha}`): every result measured for it, on every GPU, each with
the verdict `gemmwatch ci` gives it against its base by ancestry (core/verdicts/baselines.py), and the
same-job confirmations made for it (core/verdicts/confirm.py); regressions and confirmations first. The
page a CI summary links each of its rows to (`result_anchor`)."""

from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.verdicts.baselines import result_anchor, verdicts
from core.verdicts.confirm import KIND as CONFIRM, confirmation, profiles_of
from core.records.models import Commit, Job, Profile, Result
from core.verdicts.regression import PairedThresholds, Thresholds
from core.jobs.job_states import OPEN

MIN_PREFIX = 7  # like git's short sha: a shorter prefix would match too much to be a permalink
# Where a row stands in the page: what needs a look first.
RANK = {"regression": 0, "unverified": 1, "confirmation failed": 1, "faster": 2, "undecided": 3, "no baseline": 4,
        "ok": 5, "not applicable": 6}
COLUMNS = ["gpu", "job_id", "variant", "m", "n", "k", "mode", "compute_mode", "form", "gflops", "pct_of_cublas",
           "delta",
           "status", "confirmed", "ratio", "low", "high", "reason", "resource_changes", "anchor"]
CONFIRMED_AS = {"regression": "regression", "improvement": "faster", "no change": "ok", "undecided": "undecided",
                "failed": "confirmation failed"}


@dataclass
class CommitRow:
    """One result of the commit, its history verdict and, where a confirmation re-measured it, that."""

    gpu: str
    job_id: int
    variant: str
    m: int
    n: int
    k: int
    mode: str
    compute_mode: str
    form: str  # the GEMM's form key (core/description/gemm_form.py): its verdict is against results of this form only
    gflops: float | None
    pct_of_cublas: float | None
    delta: float | None
    status: str  # the final word: the confirmation's where there is one, else the history's
    reason: str
    resource_changes: list[str] = field(default_factory=list)
    confirmed: str | None = None  # the confirmation's own status, where one measured this case
    ratio: float | None = None  # head/base time in the confirmation, with its interval
    low: float | None = None
    high: float | None = None
    history_status: str | None = None
    profile_id: int | None = None  # the confirmation's result whose profile explains this row, where profiled
    confirm_job_id: int | None = None  # the confirmation that measured this row (its page's Profile button)
    result: Result | None = field(default=None, repr=False)  # the head result the row is of

    @property
    def anchor(self) -> str:
        return result_anchor(self.job_id, self.variant, self.m, self.n, self.k, self.form)


@dataclass
class CommitView:
    sha: str
    commits: list[Commit]
    rows: list[CommitRow]
    pending: list[Job]  # the commit's jobs that have not ended, or ended without results
    reason: str | None
    profiles: list[Profile] = field(default_factory=list)  # the confirmations' profiles (issue 39)
    profiled: dict[int, Result] = field(default_factory=dict)  # their results, by id


def find_commits(db: Session, sha: str) -> tuple[list[Commit], str | None]:
    """The commits a full sha or a prefix of at least MIN_PREFIX digits names (one sha, any repo)."""
    sha = sha.lower()  # a sha may be stored in either case (api/schemas.py takes both)
    exact = list(db.scalars(select(Commit).where(func.lower(Commit.sha) == sha).order_by(Commit.id)))
    if exact:
        return exact, None
    if len(sha) < MIN_PREFIX:
        return [], f"No commit {sha} has been measured (a prefix needs {MIN_PREFIX} digits at least)."
    found = list(db.scalars(select(Commit).where(func.lower(Commit.sha).startswith(sha, autoescape=True)).order_by(Commit.id).limit(50)))
    shas = sorted({c.sha for c in found})
    if len(shas) > 1:
        return [], f"{sha} names {len(shas)} commits ({', '.join(s[:12] for s in shas[:5])}): give more digits."
    if not found:
        return [], (f"No commit {sha} has been measured: post a job with \"commit\": {{\"sha\": \"{sha}\"}}, "
                    "or run gemmwatch ci on it.")
    return found, None


def _confirmations_of(db: Session, jobs: list[Job]) -> list[Job]:
    """The confirm jobs made for these jobs, in order. A confirm job names its head job (and both
    shas) in `confirm`, not in its commit column: it measures two commits. It is always made after
    its head job, so only later jobs are read."""
    heads = {j.id for j in jobs}
    if not heads:
        return []
    later = db.scalars(select(Job).where(Job.kind == CONFIRM, Job.id > min(heads)).order_by(Job.id))
    return [j for j in later if j.confirm and j.confirm.get("head_job") in heads]


def load_commit(db: Session, sha: str, th: Thresholds, pth: PairedThresholds) -> CommitView:
    commits, reason = find_commits(db, sha)
    if not commits:
        return CommitView(sha, [], [], [], reason)
    jobs = [j for j in db.scalars(select(Job).where(Job.commit_id.in_([c.id for c in commits])).order_by(Job.id))
            if j.kind != CONFIRM]
    rows: list[CommitRow] = []
    confirmed: dict[tuple, tuple] = {}  # (head job, variant, m, n, k, form) -> the confirmation's verdict
    profiles: list[Profile] = []
    profiled: dict[int, Result] = {}
    for job in _confirmations_of(db, jobs):
        found = profiles_of(db, job.id)
        profiles += sorted(found.values(), key=lambda p: p.result_id)
        profiled.update({r.id: r for r in job.results if r.id in found})
        for c in confirmation(job, pth, found):
            confirmed[((job.confirm or {}).get("head_job"), c.variant, c.m, c.n, c.k, c.form)] = (c, job.id)
    for job in jobs:
        by_id = {r.id: r for r in job.results}
        for v in verdicts(db, job, None, None, th):
            r = by_id[v.result_id]
            row = CommitRow(gpu=r.gpu.model if r.gpu else "?", job_id=job.id, variant=v.variant, m=v.m, n=v.n, k=v.k,
                            mode=r.mode, compute_mode=r.compute_mode, form=r.form, gflops=v.gflops,
                            pct_of_cublas=v.pct_of_cublas,
                            delta=v.delta, status=v.status, reason=v.reason, resource_changes=v.resource_changes,
                            history_status=v.status, result=r)
            c, confirm_job_id = confirmed.get((job.id, v.variant, v.m, v.n, v.k, r.form), (None, None))
            if c is not None and v.status != "unverified":
                row.confirm_job_id = confirm_job_id
                row.confirmed, row.ratio, row.low, row.high = c.status, c.ratio, c.low, c.high
                row.status, row.reason = CONFIRMED_AS[c.status], c.reason
                row.resource_changes = c.resource_changes or row.resource_changes
                row.profile_id = c.result_id if c.profile_status else None
            rows.append(row)
    rows.sort(key=lambda r: (RANK.get(r.status, 9), r.confirmed is None, r.gpu, r.variant, r.m * r.n * r.k, r.job_id))
    pending = [j for j in jobs if j.status in OPEN or not j.results]
    if not rows:
        reason = (f"No results for {commits[0].sha[:12]} yet: " + ", ".join(f"job #{j.id} {j.status}" for j in pending)
                  if pending else f"No results for {commits[0].sha[:12]}.")
    return CommitView(commits[0].sha, commits, rows, pending, reason, profiles, profiled)


def export_rows(view: CommitView) -> list[dict]:
    return [{c: getattr(r, c) for c in COLUMNS} for r in view.rows]

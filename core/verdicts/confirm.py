"""Confirmation jobs: the base commit's kernel and the head's, thawed from the kernel store, timed
interleaved in one job on one GPU; their verdict from the paired samples (core/verdicts/regression.py).

A confirmation and its base jobs belong to the head job's owner (issue 37, row 5): only the token
that submitted the head job, or an admin token, confirms it, and the base kernel is taken only
from a job on the base commit (of the head's repository) that the same token, or an admin token,
submitted. Before, any token could confirm anyone's job, and a job of anyone's on the base commit
(a slowed copy of the kernel, say) became the base: "regression" turned into "no change".
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from core.errors import Unprocessable
from core.verdicts.ancestry import by_time_before, first_parent
from core.description.form_keys import batch_of
from core.records.kernel_store import kernel_of
from core.jobs.cancel import NotYours
from core.records.models import ApiToken, Commit, Job, Profile
from core.records.tokens import acts_for, admin_token_ids
from core.results.env_reading import ab_of, resources_of
from core.results.result_status import NOT_APPLICABLE
from core.wire_types import Integer, Sha, Text
from core.verdicts.regression import PairedThresholds, judge_paired


# As many kernels as a job may have cases by default (GEMMWATCH_MAX_CASES), since each source is
# at least one case; a kernels folder of this project's size (34) fits in one job, and so in one
# confirmation of it (at 32, `gemmwatch ci --always-confirm` on this project's folder was refused).
MAX_SOURCES_PER_JOB = 64


class ConfirmIn(BaseModel):
    """Which of the head job's cases to confirm, against which base commit."""

    model_config = ConfigDict(extra="forbid")

    base: Sha | None = Field(default=None, description="base commit sha (or prefix); default: the head commit's"
                             " first parent, else the previous commit on its branch")
    variants: list[Text(120)] | None = Field(
        default=None, max_length=MAX_SOURCES_PER_JOB, description="default: every verified variant of the head job")
    sizes: list[list[Integer()]] | None = Field(
        default=None, max_length=64, description="[[M, N, K], ...]; default: all")
    profile: bool = Field(default=False, description="profile every confirmed case, base and head, whatever its "
                          "verdict (a confirmed regression or improvement is profiled anyway; issue 39)")


class ConfirmationOut(BaseModel):
    result_id: int
    variant: str
    m: int
    n: int
    k: int
    form: str = Field("rrr", description="the GEMM's form key (core/description/gemm_form.py): both kernels timed in it")
    status: Literal["regression", "improvement", "no change", "undecided", "failed"]
    ratio: float | None = Field(description="median head/base time per pair: 1.03 = head 3 % slower")
    low: float | None = Field(description="lower end of the ratio's confidence interval")
    high: float | None
    pairs: int
    head_gflops: float | None
    base_gflops: float | None
    head_resources: dict[str, Any] | None
    base_resources: dict[str, Any] | None
    resource_changes: list[str]
    reason: str
    profile_status: Literal["profiled", "sass only", "failed"] | None = Field(
        default=None, description="None: not profiled (no change confirmed, or not yet)")
    profile: str | None = Field(default=None, description="what moved most between base and head, a line per kernel"
                                " (GET /api/results/{result_id}/profile: the whole diff)")
    profile_reason: str | None = Field(default=None, description="why there is no Nsight Compute profile, where none")


KIND = "confirm"


def base_commit(db: Session, head: Commit, base_sha: str | None) -> Commit | None:
    if base_sha:
        return db.scalar(select(Commit).where(Commit.repo == head.repo, Commit.sha.startswith(base_sha, autoescape=True))
                         .order_by(Commit.id.desc()))
    # The first parent where gemmwatch measured it; else the previous commit on the head's branch,
    # as the history verdict compares with. A CI that benchmarks some commits only (nightly, a
    # path filter) sends parents gemmwatch never saw, and its confirmations had no base at all.
    parent = first_parent(db, head)
    if parent is not None:
        return parent
    earlier = by_time_before(db, head, 1)
    return earlier[0] if earlier else None


def _owned_by(owner: int | None):
    """Jobs the head job's owner submitted, or an admin token; with no owner (writes open), the
    jobs submitted without a token, and an admin's."""
    mine = Job.submitted_by_token_id.is_(None) if owner is None else Job.submitted_by_token_id == owner
    return or_(mine, Job.submitted_by_token_id.in_(admin_token_ids()))


def _latest_job_with(db: Session, commit: Commit, variant: str, m: int, n: int, k: int, gpu_model: str | None,
                     form: str, owner: int | None) -> Job | None:
    """The newest measuring job of the commit, submitted by `owner` (the head job's submitter) or an
    admin, that kept this case's kernel, on the same GPU model, of the same form: a base kernel of
    another form is another GEMM, no base for this one. (A job with no result of the case says no
    form: its kernel is taken, and the worker refuses it if the forms differ.) Another token's job
    on that commit is never the base: its kernel is its own."""
    jobs = db.scalars(select(Job).where(Job.commit_id == commit.id, Job.kind != KIND, _owned_by(owner))
                      .order_by(Job.id.desc())).unique()
    for job in jobs:
        if not job.plan or (gpu_model and job.gpu is not None and job.gpu.model != gpu_model):
            continue
        forms = {r.form for r in job.results if (r.variant, r.m, r.n, r.k) == (variant, m, n, k)}
        if forms and form not in forms:
            continue
        if any((e["variant"], e["m"], e["n"], e["k"]) == (variant, m, n, k) and e.get("kernel") for e in job.plan):
            return job
    return None


def check_confirmer(head_job: Job, token: ApiToken | None) -> None:
    """NotYours unless `token` submitted the head job or is an admin (None: writes need no token)."""
    if token is None or acts_for(token, head_job.submitted_by_token_id):
        return
    raise NotYours(f"job {head_job.id} was submitted by another token; only that token or an admin token confirms"
                   f" it (this one: {token.name!r}, scopes: {token.scopes})")


def plan_confirmation(db: Session, head_job: Job, body: ConfirmIn, token: ApiToken | None = None) -> Job:
    """A queued confirm job for the head job's chosen cases; NotYours where `token` is neither the
    head job's submitter nor an admin; a 422 naming the field when a case cannot be confirmed (no
    base commit, no kept kernel on either side: the base side's from a job of the head's owner)."""
    check_confirmer(head_job, token)
    if head_job.kind == KIND or head_job.commit is None:
        raise Unprocessable("head_job", f"job {head_job.id} is not a measuring job of a commit")
    if head_job.status != "succeeded":
        raise Unprocessable("head_job", f"job {head_job.id} is {head_job.status}; only a succeeded job can be confirmed")
    base = base_commit(db, head_job.commit, body.base)
    if base is None:
        raise Unprocessable("base", "no base commit: give 'base', or send the head commit's parents")
    model = head_job.gpu.model if head_job.gpu else None  # base kernels measured on this model first
    cases = sorted({(r.variant, r.m, r.n, r.k, r.form) for r in head_job.results if r.verified})
    if body.variants is not None:
        unknown = set(body.variants) - {c[0] for c in cases}
        if unknown:
            raise Unprocessable("variants", f"{sorted(unknown)} not verified in job {head_job.id}")
        cases = [c for c in cases if c[0] in body.variants]
    if body.sizes is not None:  # [M, N, K] takes the case in every batch; [M, N, K, batch] in that one
        cases = [c for c in cases if list(c[1:4]) in body.sizes or [*c[1:4], batch_of(c[4])] in body.sizes]
    if not cases:
        raise Unprocessable("sizes", f"no verified case of job {head_job.id} matches")
    entries = []
    for variant, m, n, k, form in cases:
        head_kernel = kernel_of(db, head_job, variant, m, n, k)
        base_job = _latest_job_with(db, base, variant, m, n, k, model, form, head_job.submitted_by_token_id)
        base_kernel = kernel_of(db, base_job, variant, m, n, k) if base_job else None
        if head_kernel is None or base_job is None or base_kernel is None:
            side = "head" if head_kernel is None else f"base {base.sha[:12]}"
            whose = "" if head_kernel is None else " by a job of the head job's submitter (or an admin token)"
            raise Unprocessable("variants", f"{variant} {m}x{n}x{k} ({form}): the {side} kernel was not kept in "
                                            f"that form{whose}; it cannot be re-measured")
        batch = batch_of(form)  # the worker times the batch the head timed (worker/measure/cases.py cases_from_plan)
        entries.append({"variant": variant, "m": m, "n": n, "k": k, "tunables": {}, "head": head_kernel,
                        "base": base_kernel, "base_job": base_job.id, **({"batch": batch} if batch > 1 else {})})
    return Job(
        status="queued", kind=KIND, variants=sorted({e["variant"] for e in entries}),
        sizes=[list(s) for s in sorted({(e["m"], e["n"], e["k"]) for e in entries})],
        # The head job's queue, so the confirmation runs where the head ran (a GPU of that model).
        tunables={}, sources=[], plan=entries, gpu_model=head_job.gpu_model, queue=head_job.queue,
        timing=head_job.timing,  # the confirmation times as its head job did
        progress_total=len(entries),
        confirm={"head_job": head_job.id, "head_sha": head_job.commit.sha, "base_sha": base.sha,
                 "base_jobs": sorted({e["base_job"] for e in entries}), "profile": body.profile},
    )


def confirmation(job: Job, th: PairedThresholds, profiles: dict[int, Profile] | None = None) -> list[ConfirmationOut]:
    """Each case's verdict from its pairs; with `profiles` (by result id), each one's profile line."""
    out = []
    for r in job.results:
        if r.status == NOT_APPLICABLE:  # a pair the job's kernels x sizes made that one kernel cannot run
            continue
        ab = ab_of(r.env) or {}
        head_res, base_res = resources_of(r.env), resources_of(r.env, "base_resources")
        profile = (profiles or {}).get(r.id)
        common = {"result_id": r.id, "variant": r.variant, "m": r.m, "n": r.n, "k": r.k, "form": r.form,
                  "head_gflops": r.gflops, "base_gflops": ab.get("base_gflops"), "head_resources": head_res,
                  "base_resources": base_res, "resource_changes": resource_changes(base_res, head_res),
                  **({"profile_status": profile.status, "profile": profile.summary or None,
                      "profile_reason": profile.reason} if profile is not None else {})}
        # Validated from a dict, not typed keywords: the profile's status (a String column) and
        # judge_paired's are plain str, which pydantic checks against the Literals here.
        if not r.verified or not ab:
            out.append(ConfirmationOut.model_validate({**common, "status": "failed", "ratio": None, "low": None,
                                                       "high": None, "pairs": 0, "reason": r.error or "not measured"}))
            continue
        v = judge_paired(ab["base_ms"], r.samples_ms or [], th)
        out.append(ConfirmationOut.model_validate({**common, "status": v.status, "ratio": v.ratio, "low": v.low,
                                                   "high": v.high, "pairs": v.pairs, "reason": v.reason}))
    return out


def profiles_of(db: Session, job_id: int) -> dict[int, Profile]:
    """A job's stored profiles, by result id."""
    return {p.result_id: p for p in db.scalars(select(Profile).where(Profile.job_id == job_id))}


def resource_changes(base: dict | None, head: dict | None) -> list[str]:
    """What moved between two kernels' resources, in words: "registers 128 -> 168", ..."""
    if not base or not head:
        return []
    words = []
    for key, label in (("registers_per_thread", "registers"), ("static_smem_bytes", "static smem bytes"),
                       ("dynamic_smem_bytes", "dynamic smem bytes"), ("local_bytes_per_thread", "spill bytes")):
        if base.get(key) != head.get(key):
            words.append(f"{label} {base.get(key)} -> {head.get(key)}")
    if base.get("blocks_per_sm") != head.get("blocks_per_sm"):
        words.append(f"occupancy {base.get('blocks_per_sm')} -> {head.get('blocks_per_sm')} block/SM,"
                     f" limited by {head.get('limited_by')}")
    return words

"""`gemmwatch pr-comment`: one comment on a pull request with `gemmwatch ci`'s verdicts, edited on
each push rather than added again (the repository's action, action.yml, runs it after `gemmwatch ci`).

The comment is found again by a marker in its first line, through GitHub's REST API (list a pull
request's issue comments, then update that one or create it); the token is the workflow's
GITHUB_TOKEN, which may write pull-request comments. Its headline follows `gemmwatch ci`'s exit code:
only a confirmed regression fails the check.
"""

import os
from pathlib import Path
from typing import Annotated

import httpx
import typer

from cli.messages import console as make_console

MARKER = "<!-- gemmwatch-ci -->"  # how the comment is found again; never shown
HEADLINES = {
    0: "✅ **No confirmed regression.**",
    1: "❌ **Confirmed regression: this check fails.**",
    2: "⚠️ **A kernel failed or was not verified.** The check passes: only a confirmed regression fails it.",
    3: "⚠️ **The gemmwatch server could not be reached, or the job did not finish in time.** No verdict.",
}
PAGE = 100  # GitHub's largest page of comments


def comment_body(summary: str | None, exit_code: int, run_url: str | None = None) -> str:
    """The comment's Markdown: the marker, the headline of the exit code, the summary's table."""
    headline = HEADLINES.get(exit_code, f"⚠️ **`gemmwatch ci` exited {exit_code}.**")
    parts = [MARKER, headline, summary.strip() if summary and summary.strip() else "_No summary: `gemmwatch ci` "
             "stopped before its verdicts (the workflow's log says why)._"]
    if run_url:
        parts.append(f"<sub>Updated by [this run]({run_url}); the comment is edited on each push.</sub>")
    return "\n\n".join(parts) + "\n"


def upsert(client: httpx.Client, repo: str, pr: int, body: str) -> tuple[str, int]:
    """The pull request's gemmwatch comment edited to `body`, or made where it has none yet:
    ("updated" or "created", its id)."""
    page = 1
    while True:
        resp = client.get(f"/repos/{repo}/issues/{pr}/comments", params={"per_page": PAGE, "page": page})
        resp.raise_for_status()
        comments = resp.json()
        mine = next((c for c in comments if str(c.get("body", "")).startswith(MARKER)), None)
        if mine is not None:
            client.patch(f"/repos/{repo}/issues/comments/{mine['id']}", json={"body": body}).raise_for_status()
            return "updated", int(mine["id"])
        if len(comments) < PAGE:
            break
        page += 1
    made = client.post(f"/repos/{repo}/issues/{pr}/comments", json={"body": body})
    made.raise_for_status()
    return "created", int(made.json()["id"])


def pr_comment(
    repo: Annotated[str, typer.Option(help="owner/name ($GITHUB_REPOSITORY in a workflow)")],
    pr: Annotated[int, typer.Option(help="the pull request's number")],
    exit_code: Annotated[int, typer.Option(help="`gemmwatch ci`'s exit code: the comment's headline")],
    summary: Annotated[Path | None, typer.Option(help="the summary `gemmwatch ci --summary-out` wrote")] = None,
    run_url: Annotated[str | None, typer.Option(help="the workflow run's page, linked from the comment")] = None,
):
    """Post `gemmwatch ci`'s verdicts as the pull request's one gemmwatch comment, or edit it. Needs
    $GITHUB_TOKEN; $GITHUB_API_URL is GitHub's API (https://api.github.com unless set). Exits 2
    where GitHub refuses (the token cannot write comments) or cannot be reached."""
    say = make_console()
    token = os.environ.get("GITHUB_TOKEN")
    if not token:
        say.print("GITHUB_TOKEN is not set: the comment needs a token that may write pull-request comments",
                  style="red", markup=False, highlight=False)
        raise typer.Exit(2)
    text = summary.read_text() if summary is not None and summary.is_file() else None
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
               "X-GitHub-Api-Version": "2022-11-28"}
    try:
        with httpx.Client(base_url=api, headers=headers, timeout=30) as client:
            done, comment_id = upsert(client, repo, pr, comment_body(text, exit_code, run_url))
    except httpx.HTTPStatusError as exc:
        say.print(f"GitHub refused the comment: {exc.response.status_code} {exc.response.text[:300]}", style="red",
                  markup=False, highlight=False)
        raise typer.Exit(2)
    except httpx.HTTPError as exc:
        say.print(f"GitHub could not be reached at {api}: {exc}", style="red", markup=False, highlight=False)
        raise typer.Exit(2)
    print(f"{done} the gemmwatch comment on {repo}#{pr} (comment {comment_id})")

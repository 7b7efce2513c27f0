"""Issue 52: the repository's GitHub action (action.yml) run as GitHub runs it, step after step, against a
real stack (server, Redis, a Celery worker with the CPU double for the GPU): a pull request whose head
slows a kernel gets one comment saying the regression is confirmed and the check fails; the next push,
back to the base's speed, edits that same comment to "no confirmed regression" and the check passes.

GitHub itself is not reachable from CI: its REST API for issue comments is stood in for by a small
HTTP server that keeps comments as GitHub does (list, create, edit) and records every call.
"""

import json
import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from cli.pr_comment import MARKER, comment_body, upsert
from tests.conftest import ROOT
from tests.test_ci_hook import CI_DEADLINE, KERNEL, SLOWER, ci, kernels_dir, server  # noqa: F401 (server: a fixture)

pytestmark = CI_DEADLINE  # it waits on `gemmwatch ci` (tests/test_ci_hook.py)

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
REPO, PR = "me/kernels", 7


class FakeGitHub(ThreadingHTTPServer):
    """Issue comments as GitHub's REST API keeps them: GET a page, POST a new one, PATCH one by id."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.comments: list[dict] = [{"id": 1, "body": "LGTM, but let's see the numbers", "user": {"login": "someone"}}]
        self.calls: list[tuple[str, str]] = []
        self.tokens: set[str] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeGitHub

    def log_message(self, *args):
        pass

    def _reply(self, code: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")

    def _seen(self) -> None:
        self.server.calls.append((self.command, self.path))
        self.server.tokens.add(self.headers.get("Authorization", ""))

    def do_GET(self):
        self._seen()
        m = re.fullmatch(rf"/repos/{REPO}/issues/{PR}/comments\?per_page=(\d+)&page=(\d+)", self.path)
        if not m:
            return self._reply(404, {"message": "Not Found"})
        per, page = int(m.group(1)), int(m.group(2))
        self._reply(200, self.server.comments[(page - 1) * per: page * per])

    def do_POST(self):
        self._seen()
        if self.path != f"/repos/{REPO}/issues/{PR}/comments":
            return self._reply(404, {"message": "Not Found"})
        made = {"id": 100 + len(self.server.comments), "body": self._body()["body"], "user": {"login": "github-actions"}}
        self.server.comments.append(made)
        self._reply(201, made)

    def do_PATCH(self):
        self._seen()
        m = re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", self.path)
        found = next((c for c in self.server.comments if m and c["id"] == int(m.group(1))), None)
        if found is None:
            return self._reply(404, {"message": "Not Found"})
        found["body"] = self._body()["body"]
        self._reply(200, found)


@pytest.fixture
def github():
    fake = FakeGitHub()
    thread = threading.Thread(target=fake.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()


def expand(text: str, inputs: dict, outputs: dict) -> str:
    """The action's ${{ }} expressions, as GitHub expands them for these inputs (it uses no others)."""
    def one(m):
        expr = m.group(1).strip()
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        if expr.startswith("steps.ci.outputs."):
            return outputs.get(expr.removeprefix("steps.ci.outputs."), "")
        if expr == "github.token":
            return "ghs_the-workflow-token"
        raise AssertionError(f"action.yml uses an expression this test does not know: {expr}")
    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


def run_action(tmp_path: Path, given: dict, sha: str, github: FakeGitHub) -> tuple[list[int], dict]:
    """Every step of action.yml in order, as a pull request's workflow runs it; each step's exit code."""
    declared = ACTION["inputs"]
    inputs = {name: str(given.get(name, spec.get("default", ""))) for name, spec in declared.items()}
    for name, spec in declared.items():
        assert not spec.get("required") or name in given, f"a required input is missing: {name}"
    inputs = {k: expand(v, inputs, {}) for k, v in inputs.items()}
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR}}))
    output, summary_md = tmp_path / f"output-{sha}", tmp_path / f"step-summary-{sha}.md"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMMWATCH_", "GITHUB_"))}
    base_env.update(PATH=f"{Path(os.sys.executable).parent}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(ROOT),
                    GITHUB_ACTION_PATH=str(ROOT), GITHUB_EVENT_NAME="pull_request", GITHUB_EVENT_PATH=str(event),
                    GITHUB_REPOSITORY=REPO, GITHUB_SHA=sha, GITHUB_HEAD_REF="feature", GITHUB_BASE_REF="main",
                    GITHUB_RUN_ID="42", GITHUB_SERVER_URL="https://github.com", GITHUB_API_URL=github.url,
                    GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary_md), RUNNER_TEMP=str(tmp_path), GW_TIMEOUT="120")
    codes, outputs = [], {}
    for step in ACTION["runs"]["steps"]:
        if step["name"] == "Install gemmwatch":  # this test's virtualenv is gemmwatch installed
            assert "pip install" in step["run"] and "$GITHUB_ACTION_PATH" in step["run"]
            continue
        env = {**base_env, **{k: expand(str(v), inputs, outputs) for k, v in step.get("env", {}).items()}}
        done = subprocess.run(["bash", "-c", expand(step["run"], inputs, outputs)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
        codes.append(done.returncode)
        if step.get("id") == "ci" and output.is_file():
            outputs = dict(line.split("=", 1) for line in output.read_text().split())
        print(step["name"], done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return codes, outputs


@pytest.mark.long
def test_the_action_comments_a_confirmed_regression_then_edits_the_comment_when_it_is_gone(server, github, tmp_path):  # noqa: F811
    url, token = server
    same, slow = kernels_dir(tmp_path / "base", KERNEL), kernels_dir(tmp_path / "slow", SLOWER)
    first = ci(url, token, tmp_path, "--commit", "aaaa0001", "--branch", "main", "--repo", REPO, "--kernels-dir",
               str(same))
    assert first.returncode == 0, first.stdout + first.stderr  # main's base, measured by main's own workflow
    given = {"server": url, "token": token, "sizes": "128", "base": "aaaa0001"}

    codes, outputs = run_action(tmp_path, {**given, "kernels-dir": str(slow)}, "bbbb0002", github)
    assert outputs == {"code": "1"} and codes == [0, 0, 1], codes  # ci and comment pass; the verdict fails the check
    ours = [c for c in github.comments if c["body"].startswith(MARKER)]
    assert len(ours) == 1 and "❌ **Confirmed regression: this check fails.**" in ours[0]["body"]
    assert "| my_gemm | 128×128×128 |" in ours[0]["body"] and "❌ regression" in ours[0]["body"]
    assert "https://github.com/me/kernels/actions/runs/42" in ours[0]["body"]
    assert github.tokens == {"Bearer ghs_the-workflow-token"}

    codes, outputs = run_action(tmp_path, {**given, "kernels-dir": str(same)}, "cccc0003", github)
    assert outputs == {"code": "0"} and codes == [0, 0, 0], codes
    ours = [c for c in github.comments if c["body"].startswith(MARKER)]
    assert len(ours) == 1 and "✅ **No confirmed regression.**" in ours[0]["body"], ours  # edited, not added
    assert "cccc0003" in ours[0]["body"] and "❌" not in ours[0]["body"]
    assert [m for m, _ in github.calls].count("POST") == 1 and [m for m, _ in github.calls].count("PATCH") == 1
    assert github.comments[0]["body"] == "LGTM, but let's see the numbers"  # another's comment untouched


def test_the_comment_is_found_again_past_the_first_page(github):
    import httpx

    github.comments += [{"id": 10 + i, "body": f"comment {i}", "user": {"login": "x"}} for i in range(150)]
    github.comments.append({"id": 999, "body": MARKER + "\nold", "user": {"login": "github-actions"}})
    with httpx.Client(base_url=github.url) as client:
        assert upsert(client, REPO, PR, comment_body("| t |", 0)) == ("updated", 999)
    assert github.comments[-1]["body"].startswith(MARKER + "\n\n✅")


@pytest.mark.parametrize(("code", "fail_on_error", "exits"), [(0, "false", 0), (1, "false", 1), (2, "false", 0),
                                                              (3, "false", 0), (2, "true", 2), (3, "true", 3)])
def test_only_a_confirmed_regression_fails_the_check_unless_asked(tmp_path, code, fail_on_error, exits):
    verdict = next(s for s in ACTION["runs"]["steps"] if s["name"] == "Verdict")
    env = {**os.environ, "GITHUB_ACTION_PATH": str(ROOT), "GW_CODE": str(code), "GW_FAIL_ON_ERROR": fail_on_error}
    done = subprocess.run(["bash", "-c", verdict["run"]], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == exits, done.stdout + done.stderr


def test_a_comment_without_a_summary_says_why():
    body = comment_body(None, 3)
    assert body.startswith(MARKER) and "could not be reached" in body and "stopped before its verdicts" in body

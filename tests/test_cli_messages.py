"""cli/messages.py on the answers the server gives: each refusal as lines a person reads (the
whole CLI process is exercised in tests/test_newcomer.py)."""

import httpx

from cli.messages import UNBOUNDED_WIDTH, console, refusal, unreachable


def _validation(msg: str, loc=("body", "variants")) -> httpx.Response:
    item = {"type": "value_error", "loc": list(loc), "msg": f"Value error, {msg}", "ctx": {"error": msg}}
    return httpx.Response(422, json={"detail": [item]})


def test_an_unknown_variant_among_the_jobs_own_sources_is_matched_against_them_too():
    said = refusal(_validation("unknown variant(s) ['my_gemm_v2', 'zzzz']; known variants: naive, smem_tiled; "
                               "the job's sources: my_gemm, my_gemm_v3"))
    assert said.splitlines() == [
        "unknown variant 'my_gemm_v2': did you mean my_gemm_v3, my_gemm? `gemmwatch variants` lists them (4 known).",
        "unknown variant 'zzzz': no known variant is close to it. `gemmwatch variants` lists them (4 known).",
    ]


def test_other_refusals_say_the_field_and_the_reason_once_or_the_status_and_detail():
    assert refusal(_validation("each variant may be listed once")) == "variants: each variant may be listed once"
    assert refusal(httpx.Response(401, json={"detail": "a write needs a token"})) == "401: a write needs a token"
    assert refusal(httpx.Response(502, text="<html>bad gateway</html>")) == "502: <html>bad gateway</html>"


def test_unreachable_names_the_url_and_what_to_do():
    request = httpx.Request("GET", "http://127.0.0.1:9/api")
    refused = httpx.ConnectError("[Errno 111] Connection refused", request=request)
    said = unreachable("http://127.0.0.1:9", refused)
    assert said.startswith("cannot reach http://127.0.0.1:9: nothing is listening there (connection refused).")
    assert "`make up`" in said and "Errno" not in said
    in_ci = unreachable("http://ci:8000", httpx.ReadTimeout("timed out", request=request), start_hint=False)
    assert in_ci == ("cannot reach http://ci:8000: it did not answer in time. Point at a running server with "
                     "--server URL or $GEMMWATCH_SERVER.")


def test_a_console_into_a_pipe_has_no_80_column_limit(monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdout", io.StringIO())  # not a terminal, whether pytest captures or not
    monkeypatch.delenv("COLUMNS", raising=False)
    assert console().width == UNBOUNDED_WIDTH
    monkeypatch.setenv("COLUMNS", "100")
    assert console().width == 100  # asked for


def test_an_error_that_quotes_a_pattern_keeps_its_brackets(tmp_path):
    """rich reads "[a-z]" as markup: a refused kernel name's pattern once printed as '^{0,59}$'."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "k.cu").write_text('extern "C" __global__ void k() {}\n')
    (folder / "gemmwatch.json").write_text(json.dumps(
        [{"name": "Bad-Name", "source": "k.cu", "entry": "k", "block": [16, 16], "grid": {"tile": [16, 16]}}]))
    root = Path(__file__).resolve().parents[1]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GEMMWATCH_")}, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-m", "cli.main", "run", "--kernels-dir", str(folder)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode != 0
    assert "^[a-z][a-z0-9_]{0,59}$" in done.stdout + done.stderr, done.stdout + done.stderr

"""Issue 49, row 1: the source guard is linear in every character class, and bounded before it starts.

As reported: a `jobs` token posted a file of "\\x01\\n" x 300,000 twice; each took 166 s (for each
control character the guard counted the newlines before it) and answered a 17.9 MB 422, and
another user's trivial job waited 162 s for its 202. Through the real server, on both databases.
No sleep orders anything: each answer is awaited against a generous deadline, far below what the
quadratic guard took.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from core.description import source_guard
from core.description.source_guard import MAX_PROBLEMS_SHOWN, SourceRefused, check_source, scan_source
from tests.descriptions import one_file
from tests.test_request_gate import token_with

DEADLINE_S = 30.0
CONTROL_FILE = "\x01\n" * 300_000  # the report's file: 600,000 bytes


def job_with(text: str, name: str = "ctl") -> dict:
    return {"sources": [one_file(name, text, name, [16, 16])], "sizes": [[64, 64, 64]]}


def test_two_posts_of_the_control_file_are_refused_briefly_and_another_users_job_is_not_held(cfg, live_server):
    base = live_server(cfg, GEMMWATCH_MAX_SOURCE_BYTES="700000")  # the file within the limit: the guard reads it
    attacker, victim = token_with(cfg, "attacker"), token_with(cfg, "victim")

    def post(body: dict, token: str) -> tuple[httpx.Response, float]:
        started = time.monotonic()
        answer = httpx.post(f"{base}/api/jobs", json=body, headers={"Authorization": f"Bearer {token}"},
                            timeout=DEADLINE_S)
        return answer, time.monotonic() - started

    with ThreadPoolExecutor(3) as pool:
        attacks = [pool.submit(post, job_with(CONTROL_FILE), attacker) for _ in range(2)]
        trivial = pool.submit(post, {"variants": ["naive"], "sizes": [[64, 64, 64]]}, victim)
        (answer, took), (_, _) = attacks[0].result(), attacks[1].result()
        accepted, waited = trivial.result()
    assert accepted.status_code == 202 and waited < DEADLINE_S, (accepted.text, waited)
    assert answer.status_code == 422 and took < DEADLINE_S, took
    # A few lines, not 17.9 MB: the first control characters by line, then how many more.
    assert len(answer.content) < 16_000, len(answer.content)
    assert "control character '\\\\x01' in the source" in answer.text and "299980 more control characters" in \
        answer.text, answer.text[:2000]


def test_the_deployments_source_limit_is_applied_before_the_guard_reads_anything(cfg, live_server):
    """Past GEMMWATCH_MAX_SOURCE_BYTES the 422 names the limit, not the control characters: the
    guard never read the file (before, a description's own 4 MB cap was the only bound before it)."""
    base = live_server(cfg, GEMMWATCH_MAX_SOURCE_BYTES="100000")
    answer = httpx.post(f"{base}/api/jobs", json=job_with(CONTROL_FILE),
                        headers={"Authorization": f"Bearer {token_with(cfg, 'attacker')}"}, timeout=DEADLINE_S)
    assert answer.status_code == 422, answer.text
    assert "GEMMWATCH_MAX_SOURCE_BYTES" in answer.text and "control character" not in answer.text, answer.text


@pytest.mark.parametrize("piece", [
    "\x01\n", "\x00x\n", "\n", " \n", "#\n", "#define A0\n", "/*\n*/#define A0\n", "a\\\n", "a\\ \n", "??=define X\n",
    "'\"\n", '"abc\\"\n', "\\", "/*", "_Pragma(\"unroll\")\n", '#include "a.h"\n', "??=\\ \n#\n", "1e+__has_include\n",
    "#pragma once\n", "%:define X\n", "\r\n#\r", "x" * 63 + "\n",
])
def test_the_guard_takes_bounded_time_per_byte_in_every_character_class(piece):
    """100 KB of each class (the report's control file at its 600 KB) in well under the time the
    quadratic guard took: about 7 us a byte at worst here, idle (docs/SECURITY.md), 300 us allowed."""
    text = piece * ((600_000 if piece == "\x01\n" else 100_000) // len(piece))
    source_guard._scan_remembered.cache_clear()
    started = time.monotonic()
    try:
        check_source(text)
    except SourceRefused as refused:
        assert len(str(refused).splitlines()) <= MAX_PROBLEMS_SHOWN + 1
    assert time.monotonic() - started < 300e-6 * len(text), piece


def test_a_long_text_is_judged_each_time_and_not_remembered():
    """A job may carry 2 MB of source: 512 such texts remembered would hold a gigabyte of the worker's
    memory. A header library's files are remembered (they are short, and shared by every kernel)."""
    source_guard._scan_remembered.cache_clear()
    long_text = "#define A0\n" * (source_guard.REMEMBERED_TEXT_MOST // 11 + 1)
    assert scan_source(long_text) == scan_source(long_text)
    assert source_guard._scan_remembered.cache_info().currsize == 0
    scan_source("#define A0\n")
    assert source_guard._scan_remembered.cache_info().currsize == 1

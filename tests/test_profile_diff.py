"""Issue 39's parsers and ranking, against the H100 recordings in tests/fixtures/profiles/: two
base/head pairs (tail_split_k_overlap with its optimisation reverted; bf16_wgmma whose head spills
8 bytes), both ~4 % slower in ncu's own gpu__time_duration."""

import csv
import dataclasses
import gzip
import io
import json
from pathlib import Path

import pytest

from core.profile import ncu_metrics, profile_diff, sass_stats
from core.profile.ncu_metrics import NcuParseError, parse_ncu_csv, parse_number
from worker.profile.profiler import read_metrics
from core.profile.profile_diff import diff_launch, diff_profiles
from core.profile.sass_stats import Instruction, SassParseError, parse_res_usage, parse_sass

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"


def _text(name: str) -> str:
    path = FIXTURES / name
    return gzip.decompress(path.read_bytes()).decode() if name.endswith(".gz") else path.read_text()


def _load(label: str):
    return (parse_ncu_csv(_text(f"{label}.ncu.csv.gz")), parse_sass(_text(f"{label}.sass.gz")),
            parse_res_usage(_text(f"{label}.res")))


@pytest.fixture(scope="module")
def recorded():
    return {label: _load(label) for label in ("split_base", "split_head", "wgmma_base", "wgmma_head")}


def _pair(recorded, pair: str, with_ncu: bool = True, with_sass: bool = True):
    b, h = recorded[f"{pair}_base"], recorded[f"{pair}_head"]
    [diff] = diff_launch(
        b[0] if with_ncu else None, h[0] if with_ncu else None,
        b[1] if with_sass else None, h[1] if with_sass else None,
        b[2] if with_sass else None, h[2] if with_sass else None,
        ncu_reason=None if with_ncu else "ncu is not installed on the worker")
    return diff


# --- ncu's raw page -----------------------------------------------------------------------------

@pytest.mark.parametrize("cell, value", [
    ("2,745,376", 2745376.0), ("255 (255)", 255.0), ("-0.00", 0.0), ("4,483,056.47", 4483056.47),
    ("1,980,000", 1980000.0), ("no data", None), ("nan", None), ("PolicySpread", None), ("", None),
    ("(sgemm_tail_split_k)", None), ("12,34", None),
])
def test_numbers_as_ncu_prints_them(cell, value):
    assert parse_number(cell) == value



@pytest.mark.parametrize("label, duration, registers", [
    ("split_base", 2_771_936, 255), ("split_head", 2_835_552, 255),
    ("wgmma_base", 452_992, 168), ("wgmma_head", 475_296, 168),
])
def test_recorded_durations_and_registers(recorded, label, duration, registers):
    [kernel] = recorded[label][0]
    assert kernel.value("duration") == duration
    assert kernel.value("registers") == registers
    [res] = recorded[label][2].values()
    assert res.registers == registers


def test_the_recorded_kernel_row(recorded):
    [split] = recorded["split_base"][0]
    assert split.name == "sgemm_tail_split_k" and split.block == "(256, 1, 1)" and split.grid == "(1440, 1, 1)"
    assert split.value("sm_clock") == pytest.approx(1_974_247_376.2)
    assert split.value("l2_hit_rate") == 75.78 and split.value("achieved_occupancy") == 12.49
    assert split.mix["LDS"] == 100_674_816 and split.mix["LDG"] == 6_529_952
    # "selected" is the issuing cycle, not a stall; the top stall of this FFMA-bound kernel
    assert "selected" not in split.stalls and split.top_stalls(1) == [("not_selected", 0.79)]
    [wgmma] = recorded["wgmma_head"][0]
    assert wgmma.top_stalls(2) == [("long_scoreboard", 5.57), ("barrier", 2.3)]
    # the spill at run time: local loads and stores executed (hardware counters)
    assert wgmma.mix["LDL"] == 393_216 and wgmma.mix["STL"] == 6_144
    assert wgmma.occupancy_limiter == "registers + shared memory"


@pytest.mark.parametrize("label", ["split_base", "split_head", "wgmma_base", "wgmma_head"])
def test_the_recordings_hold_every_metric_the_worker_asks_for_and_none_patched(recorded, label):
    """The recordings were made with the worker's own ncu command: each metric the diff reads is a
    column with a number in it (a stall reason at least once), and no SASS-patched metric is."""
    [kernel] = recorded[label][0]
    asked = read_metrics()
    missing = [m for m in asked[:-1] if parse_number(kernel.raw.get(m)) is None]
    assert not missing, missing
    assert kernel.stalls and not [c for c in kernel.raw if c.startswith("sass__") or "__sass_" in c]


def test_a_missing_metric_is_none_not_a_crash():
    text = _text("wgmma_base.ncu.csv.gz")
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    drop = {rows[0].index("launch__registers_per_thread"), rows[0].index(
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio")}
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerows([[c for i, c in enumerate(r) if i not in drop] for r in rows])
    [kernel] = parse_ncu_csv("\n".join(lines[:start]) + "\n" + out.getvalue())
    assert kernel.value("registers") is None
    assert "barrier" not in kernel.stalls and kernel.value("duration") == 452_992
    [full] = parse_ncu_csv(text)
    diff = diff_profiles("k", full, kernel)
    registers = next(c for c in diff.rows if c.key == "ncu.registers")
    assert registers.head is None and not registers.changed
    assert "n/a" in registers.text()


@pytest.mark.parametrize("text, words", [
    ("", "no Nsight Compute CSV header"),
    ("hello\nworld\n", "no Nsight Compute CSV header"),
    ("==ERROR== the profiler could not start\n", "the profiler could not start"),
    ('"ID","Kernel Name","x"\n"","",""\n', "no kernel rows"),
    ('"ID","Kernel Name","x"\n"","",""\n"0","k"\n', "row 1 has 2 cells"),
])
def test_garbage_ncu_output_is_a_clear_error(text, words):
    with pytest.raises(NcuParseError, match=words):
        parse_ncu_csv(text)


def test_the_metric_table_is_one_documented_table():
    keys = [s.key for s in ncu_metrics.METRICS]
    assert len(keys) == len(set(keys))
    # every metric has a role in the ranking, and none is left without one
    assert set(keys) == set(profile_diff.NCU_ROLES)
    assert all(s.metric and s.label and s.higher_is_better in (True, False, None) for s in ncu_metrics.METRICS)


# --- cuobjdump ----------------------------------------------------------------------------------

def test_res_usage_stack_of_the_spilling_head(recorded):
    [base] = recorded["wgmma_base"][2].values()
    [head] = recorded["wgmma_head"][2].values()
    assert (base.name, base.stack, base.local, base.shared) == ("gemm_half_wgmma", 0, 0, 1024)
    assert (head.registers, head.stack, head.local) == (168, 8, 0)


def test_spill_instructions_only_in_the_head(recorded):
    [base] = recorded["wgmma_base"][1].values()
    [head] = recorded["wgmma_head"][1].values()
    assert base.counts["LDL"] == base.counts["STL"] == 0
    assert head.counts["LDL"] == 2 and head.counts["STL"] == 1
    spills = [i for i in head.instructions if i.mnemonic in ("LDL", "STL")]
    assert [(hex(i.address), i.mnemonic) for i in spills][:2] == [("0x450", "STL"), ("0xba0", "LDL")]


def test_the_main_loops(recorded):
    [wb] = recorded["wgmma_base"][1].values()
    [wh] = recorded["wgmma_head"][1].values()
    # the k-loop of 4 HGMMA, not the out-of-line wait paths that branch back from after EXIT
    assert (wb.main_loop.start, wb.main_loop.end, wb.main_loop_counts["GMMA"]) == (0x780, 0xB50, 4)
    assert (wh.main_loop.start, wh.main_loop.end) == (0x950, 0xD70)
    assert wh.main_loop_counts["LDL"] == 1  # the spill is reloaded every k-step
    assert all(not any(i.mnemonic == "EXIT" and i.predicate is None for i in lp.body) for lp in wh.loops)
    [sb] = recorded["split_base"][1].values()
    assert sb.main_loop_counts["FFMA"] == 2048 and sb.main_loop_counts["BAR"] == 1


def test_main_loop_diff_says_what_moved(recorded):
    [sb], [sh] = recorded["split_base"][1].values(), recorded["split_head"][1].values()
    loop = sass_stats.diff_loops(sb.main_loop, sh.main_loop)
    # the last k-step (128 FFMA) behind the barrier in base, in front of it in head
    assert loop.base_barriers == [(1920, 128)] and loop.head_barriers == [(2048, 0)]
    assert "FFMA" not in loop.class_delta  # same work, moved
    assert loop.unified[0].startswith("--- base main loop") and len(loop.unified) <= 60 and loop.truncated
    assert any(line.endswith("[x15]") and line.startswith("+FFMA") for line in loop.unified)
    [wb], [wh] = recorded["wgmma_base"][1].values(), recorded["wgmma_head"][1].values()
    loop = sass_stats.diff_loops(wb.main_loop, wh.main_loop)
    assert loop.class_delta["LDL"] == (0, 1) and "+LDL R, [R]" in loop.unified
    assert json.loads(json.dumps(loop.to_json()))["class_delta"]["LDL"] == [0, 1]


def test_registers_renamed_away():
    a = Instruction(0x10, "@P0", "FFMA", " R1, R2, R3.reuse, R4")
    b = Instruction(0x20, "@P3", "FFMA", " R9, R8, R7.reuse, R6")
    assert a.normalised() == b.normalised() == "@P FFMA R, R, R.reuse, R"
    assert Instruction(0x30, None, "BRA", " 0x4d10").normalised() == "BRA <target>"
    assert Instruction(0x30, None, "ISETP.GE.AND", " P0, PT, RZ, 0x3, PT").normalised() == "ISETP.GE.AND P, PT, RZ, 0x3, PT"


def test_predicates_and_classes():
    [fn] = parse_sass(
        "\tFunction : k\n"
        "        /*0000*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ; /* 0x0 */\n"
        "                                                                           /* 0x000fe20000000800 */\n"
        "        /*0010*/              @!P0 BRA 0x0 ;   /* 0x0 */\n"
        "        /*0020*/                   EXIT ;\n").values()
    assert [(i.predicate, i.cls) for i in fn.instructions] == [(None, "GMMA"), ("@!P0", "BRANCH"), (None, "BRANCH")]
    assert fn.main_loop.math == 1 and fn.main_loop.end == 0x10


@pytest.mark.parametrize("parse, text", [
    (parse_sass, "not a listing"), (parse_sass, "\tFunction : k\n(no instructions)\n"),
    (parse_res_usage, "Resource usage:\n nothing\n"),
])
def test_garbage_cuobjdump_output_is_a_clear_error(parse, text):
    with pytest.raises(SassParseError, match="cuobjdump"):
        parse(text)


# --- the diff, ranked ---------------------------------------------------------------------------

def test_wgmma_pair_names_the_spill_first(recorded):
    diff = _pair(recorded, "wgmma")
    assert diff.effect.base == 452_992 and diff.effect.head == 475_296
    first = diff.top_causes()[0]
    assert first.group == "spills"
    line = diff.summary_line()
    assert line.startswith("gemm_half_wgmma: duration 452,992 ns → 475,296 ns (+4.9 %); what moved most: local-memory spills")
    assert "local loads (LDL) 0 → 393,216" in line
    assert "stack frame 0 bytes → 8 bytes" in line and "LDL in the main loop 0 → 1" in line
    # the spill outranks the long-scoreboard stall it causes, and every counter-evidence row
    ranked = [c.key for c in diff.ranked]
    assert ranked.index("mix.LDL") < ranked.index("stall.long_scoreboard")
    l1 = next(c for c in diff.rows if c.key == "ncu.l1_hit_rate")  # 3.0 → 5.9 %: better, not a cause
    assert l1.changed and l1.score < next(c for c in diff.rows if c.key == "stall.long_scoreboard").score


def test_split_pair_names_the_barrier_move_then_the_stall(recorded):
    diff = _pair(recorded, "split")
    line = diff.summary_line()
    assert line.startswith("sgemm_tail_split_k: duration 2,771,936 ns → 2,835,552 ns (+2.3 %)")
    causes = diff.top_causes()
    assert [c.key for c in causes[:2]] == ["loop.barrier_placement", "stall.dispatch_stall"]
    assert "after the barrier 128 → 0" in line
    # the barrier stall itself did not move (0.03 both): it must not be named
    barrier = next(c for c in diff.rows if c.key == "stall.barrier")
    assert (barrier.base, barrier.head, barrier.changed) == (0.03, 0.03, False)
    # ncu alone: the dispatch stall leads, "not selected" (a ready warp beside) does not
    [ncu_only] = diff_launch(recorded["split_base"][0], recorded["split_head"][0])
    assert ncu_only.top_causes()[0].key == "stall.dispatch_stall"
    score = {c.key: c.score for c in ncu_only.rows}
    # both moved +0.05 cycles per instruction; only one is a cause
    assert score["stall.dispatch_stall"] > 2 * score["stall.not_selected"]
    assert "stall 'dispatch stall' 0.16 → 0.21" in ncu_only.summary_line()


def test_without_ncu_the_sass_diff_still_comes_with_the_reason(recorded):
    diff = _pair(recorded, "wgmma", with_ncu=False)
    assert diff.effect is None and diff.ncu_reason == "ncu is not installed on the worker"
    line = diff.summary_line()
    assert line.startswith("gemm_half_wgmma: no Nsight Compute profile (ncu is not installed on the worker); SASS: local-memory spills")
    assert diff.loop.class_delta["LDL"] == (0, 1)
    assert not any(c.source == "ncu" for c in diff.rows)
    split = _pair(recorded, "split", with_ncu=False)
    assert split.top_causes()[0].key == "loop.barrier_placement"
    # one side's record missing: said, not crashed
    [kernel] = recorded["wgmma_base"][0]
    one_sided = diff_profiles("gemm_half_wgmma", kernel, None)
    assert one_sided.effect is None and "head" in one_sided.summary_line()


def test_json_is_the_full_table(recorded):
    diff = _pair(recorded, "wgmma")
    data = json.loads(json.dumps(diff.to_json()))
    assert data["summary"] == diff.summary_line()
    assert data["effect"]["key"] == "ncu.duration" and data["effect"]["relative"] == pytest.approx(0.04924, abs=1e-4)
    keys = [r["key"] for r in data["rows"]]
    assert keys[0] == "ncu.duration"  # the effect first, then the ranked causes
    assert data["ranked"][0] in ("mix.LDL", "res.stack")
    assert len(keys) == len(set(keys)) == len(diff.rows)
    assert data["main_loop"]["class_delta"]["LDL"] == [0, 1] and data["sass_counts"]["head"]["STL"] == 1


def _profile(**values):
    base = dict.fromkeys([s.key for s in ncu_metrics.METRICS])
    base.update(values)
    return ncu_metrics.KernelProfile(0, "k", "", "", base, {}, {}, {})


def test_direction_decides_between_equal_moves():
    # occupancy falls 20 % (explains a slower head), the L2 hit rate rises 20 points (cannot
    # explain it): occupancy first, the hit rate last
    base = _profile(duration=100.0, achieved_occupancy=25.0, l2_hit_rate=50.0, instructions=1000.0)
    head = _profile(duration=110.0, achieved_occupancy=20.0, l2_hit_rate=70.0, instructions=1000.0)
    diff = diff_profiles("k", base, head)
    ranked = [c.key for c in diff.ranked]
    assert ranked[0] == "ncu.achieved_occupancy" and ranked[-1] == "ncu.l2_hit_rate"
    # the same moves under a faster head: the hit rate now explains it, the occupancy fall does not
    faster = diff_profiles("k", base, dataclasses.replace(head, values={**head.values, "duration": 90.0}))
    assert faster.ranked[0].key == "ncu.l2_hit_rate"


def test_stalls_weigh_by_their_share_of_a_warps_time():
    # a tiny stall tripling (0.01 → 0.03) moves 0.02 of 10 cycles; a big one +10 % moves 0.5
    base = dataclasses.replace(_profile(duration=1.0, warp_latency=10.0), stalls={"barrier": 0.01, "long_scoreboard": 5.0})
    head = dataclasses.replace(_profile(duration=1.1, warp_latency=10.5), stalls={"barrier": 0.03, "long_scoreboard": 5.5})
    diff = diff_profiles("k", base, head)
    assert diff.top_causes()[0].key == "stall.long_scoreboard"


def test_multi_kernel_launches_pair_by_name_and_occurrence(recorded):
    [split] = recorded["split_base"][0]
    [split_head] = recorded["split_head"][0]

    def named(kernel, name, duration):
        return dataclasses.replace(kernel, name=name, values={**kernel.values, "duration": duration})

    base = [named(split, "gemm", 10.0), named(split, "reduce", 1.0), named(split, "gemm", 20.0)]
    head = [named(split_head, "gemm", 11.0), named(split_head, "reduce", 1.0), named(split_head, "gemm", 30.0)]
    diffs = diff_launch(base, head)
    assert [d.kernel for d in diffs] == ["gemm", "reduce", "gemm #2"]
    assert [(d.effect.base, d.effect.head) for d in diffs] == [(10.0, 11.0), (1.0, 1.0), (20.0, 30.0)]
    lonely = diff_launch(base, head[:2])
    assert lonely[2].effect is None and "head has no launch of gemm #2" in lonely[2].summary_line()

"""A commit's export (core/exchange/commit_export.py) in the Bencher Metric Format, for bencher.dev
and the tools that read it: {benchmark: {measure: {value, lower_value, upper_value}}}.

A benchmark is one series as gemmwatch's verdicts see it (variant, size, form, precision, GPU model,
timing mode): results of two modes or two forms are other benchmarks, never one. Its measures:
`latency`, the median in nanoseconds (Bencher's built-in latency unit) between the first and third
quartiles of the samples, and `gflops` (custom; higher is better), the median's rate. Only passed
results are measures: an incorrect kernel's time is no figure to track.
"""

from core.exchange.commit_export import CommitExport, ExportedResult

NAME_MAX = 1024  # Bencher: a benchmark's name; a measure's slug at most 64
MEASURES = ("latency", "gflops")


def benchmark_name(r: ExportedResult) -> str:
    return f"{r.variant} {r.m}x{r.n}x{r.k} {r.form} {r.compute_mode} {r.gpu} {r.timing.mode}"[:NAME_MAX]


def to_bmf(export: CommitExport) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in export.results:
        t = r.timing
        if r.status != "passed" or t.median_ms is None:
            continue
        latency = {"value": t.median_ms * 1e6}
        if t.q1_ms is not None and t.q3_ms is not None:
            latency |= {"lower_value": t.q1_ms * 1e6, "upper_value": t.q3_ms * 1e6}
        measures = {"latency": latency}
        if r.gflops is not None:
            measures["gflops"] = {"value": r.gflops}
        out[benchmark_name(r)] = measures
    return out

"""Plotly figure builders. Each returns a Figure, or the reason there is nothing to draw.

Numbers go to Plotly as plain lists (not numpy arrays, which plotly.py would base64-encode),
so a page's chart data can be read back as JSON by the tests.

Plotly draws its text (titles, tick labels, legend names, hover, bar labels) from a subset of
HTML: `<a href>` becomes a live link, `<span style>` restyles. Every string that came from a
writer or from the URL (GPU names and models, variants, commit shas and messages, errors, the
compared sides) goes through `_t` first, so it is drawn as text (issue 20, finding 7). Only the
templates written here carry markup.
"""

import html
from statistics import fmean

from plotly.colors import qualitative

from core.description.timing_modes import mode_words
from core.description.form_keys import DEFAULT_KEY, label as form_label
from dashboard.compare import WHAT, Comparison
from dashboard.filters import by_flops, size_label, size_text
from dashboard.history import History
from dashboard.overview import Ladder
from dashboard.sweep import SweepFilter, SweepPoint

PALETTE = qualitative.Plotly + qualitative.D3[1:] + qualitative.Dark24
FAIL = {"symbol": "x", "size": 13, "color": "#c62828", "line": {"width": 2}}
# plotly_white's look, as far as these charts (scatter and bar on x and y axes) use it: Plotly.js
# knows no template by name, plotly.py wrote all of that one (some 7 KB) into every chart.
_AXIS = {"gridcolor": "#EBF0F8", "linecolor": "#EBF0F8", "zerolinecolor": "#EBF0F8", "zerolinewidth": 2, "ticks": "",
         "automargin": True, "title": {"standoff": 15}}
WHITE = {"layout": {"font": {"color": "#2a3f5f"}, "paper_bgcolor": "white", "plot_bgcolor": "white",
                    "hoverlabel": {"align": "left"}, "title": {"x": 0.05}, "xaxis": _AXIS, "yaxis": _AXIS,
                    "autotypenumbers": "strict"},
         "data": {"bar": [{"marker": {"line": {"color": "white", "width": 0.5}}}]}}
LAYOUT = {"template": WHITE, "margin": {"l": 70, "r": 20, "t": 70, "b": 60}, "height": 440,
          "hovermode": "closest", "legend": {"orientation": "v"}}


class Figure:
    """A chart as Plotly.js reads it: {"data": [trace, ...], "layout": {...}}, in plain dicts.

    plotly.py's graph objects validated every property of every point as a page was made (most
    of the page's time, docs/BENCHMARKS.md); tests/test_dashboard.py validates each page's figure
    with them instead, so a misspelt property still fails."""

    def __init__(self):
        self.data: list[dict] = []
        self.layout: dict = {}

    def add_trace(self, trace: dict) -> None:
        self.data.append(trace)

    def update_layout(self, **layout) -> None:
        self.layout.update(layout)

    def to_plotly_json(self) -> dict:
        return {"data": self.data, "layout": self.layout}


def scatter(**props) -> dict:
    return {"type": "scatter", **props}


def bar(**props) -> dict:
    return {"type": "bar", **props}



def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _t(s) -> str:
    """A value drawn as text by Plotly: its markup characters as entities, which Plotly shows as
    the characters themselves. (Not quotes: Plotly decodes no &quot;, and outside a tag they are text.)"""
    return html.escape(str(s), quote=False)


def _text(s: str | None, width: int = 72) -> str:
    """Free text (commit messages, errors) made safe for Plotly's hover HTML, one line."""
    line = (s or "").strip().splitlines()[0] if (s or "").strip() else ""
    return _t(line if len(line) <= width else line[: width - 1] + "…")


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _failures(x: list, customdata: list[list], hover: str) -> dict:
    """Failed verification drawn as red crosses on the axis: a wrong kernel has no speed."""
    return scatter(x=x, y=[0] * len(x), mode="markers+text", name="failed verification", marker=FAIL,
                      text=["failed"] * len(x), textposition="top center", textfont={"color": FAIL["color"]},
                      customdata=customdata, hovertemplate=hover + "<extra>failed verification</extra>")


# -- empty views: what is missing, in words (never "None"), and how to get results ----------

GET_RESULTS = "run gemmwatch submit, or load the demo's measured figures with gemmwatch demo"


def what(precision: str = "fp32", form: str = DEFAULT_KEY) -> str:
    """"results", or "BF16 results", "results of form rcr+ab+acc16": the precision and form where not the default."""
    words = "results" if precision == "fp32" else f"{precision.upper()} results"
    return words if form == DEFAULT_KEY else f"{words} of form {form}"


def scope(gpu: str | None = None, size=None, mode: str | None = None) -> str:
    """" for the H100 at 4096×4096×4096 in cold mode": only what is known, "" when nothing is."""
    parts = [f"for the {gpu}" if gpu else "", f"at {size_text(size)}" if size else "", f"in {mode} mode" if mode else ""]
    text = " ".join(p for p in parts if p)
    return f" {text}" if text else ""


# -- history ------------------------------------------------------------------------------

def history_figure(h: History) -> Figure | str:
    f = h.f
    if f.gpu is None or f.size is None:
        who = f" on {f.gpu}" if f.gpu else ""
        return (f"No verified {what(f.precision, f.form)}{who} with a commit yet: {GET_RESULTS}. Each commit's "
                "results then appear here as a point.")
    where = scope(f.gpu, f.size, f.mode)
    if not h.points and h.n_unverified:
        return (f"No verified {what(f.precision, f.form)}{where}: all {h.n_unverified} results there failed "
                "verification, and a wrong kernel has no speed to chart. The jobs page shows their errors.")
    if not h.points:
        return (f"No verified {what(f.precision, f.form)}{where} that carry a commit: choose another GPU, size, mode "
                "or precision. The history draws only results that name their commit, as gemmwatch ci's do.")

    fig = Figure()
    x_of = {sha: _t(sha[:10]) for sha in h.commits}
    series: dict[str, list] = {}
    for p in h.points:
        series.setdefault(p.variant, []).append(p)
    for i, (variant, pts) in enumerate(series.items()):
        color, xs = _color(i), [x_of[p.sha] for p in pts]
        ys = [p.gflops for p in pts]
        upper = [p.gflops * (1 + (p.noise or 0)) for p in pts]
        lower = [p.gflops * (1 - (p.noise or 0)) for p in pts]
        # The band is each point's own sample noise (stddev/mean): a step smaller than it is not news.
        fig.add_trace(scatter(x=xs + xs[::-1], y=upper + lower[::-1], fill="toself", mode="lines",
                                 line={"width": 0}, fillcolor=_rgba(color, 0.18), name=f"{_t(variant)} noise",
                                 legendgroup=variant, showlegend=False, hoverinfo="skip"))
        # Hover text made here, one string a point: far cheaper for plotly.py to validate than
        # per-point customdata lists when a page holds thousands of points.
        hover = [f"<b>{_t(variant)}</b> {p.gflops:,.0f} GFLOPS ({p.pct_of_cublas or 0:.1f}% of cuBLAS)<br>"
                 f"{_t(p.sha)}<br>{_text(p.message)}<br>{str(p.commit_time)[:19]} UTC<br>"
                 f"noise ±{(p.noise or 0) * 100:.2f}% · {p.n_results} result(s)" for p in pts]
        fig.add_trace(scatter(x=xs, y=ys, mode="lines+markers", name=_t(variant), legendgroup=variant,
                                 line={"color": color}, text=hover, hovertemplate="%{text}<extra></extra>"))
    cublas: dict[str, list[float]] = {}
    for p in h.points:  # cuBLAS timed in the same jobs: the line to beat
        if p.cublas_gflops:
            cublas.setdefault(p.sha, []).append(p.cublas_gflops)
    if cublas:
        shas = [s for s in h.commits if s in cublas]
        fig.add_trace(scatter(x=[x_of[s] for s in shas], y=[fmean(cublas[s]) for s in shas], mode="lines",
                                 name="cuBLAS (same jobs)", line={"dash": "dash", "color": "gray"}))
    if h.regressions:
        fig.add_trace(scatter(
            x=[x_of[p.sha] for p in h.regressions], y=[p.gflops for p in h.regressions], mode="markers",
            name="regression", marker={**FAIL, "size": 15},
            customdata=[[_t(p.variant), _t(p.sha), _t(p.verdict.reason)] for p in h.regressions],
            hovertemplate="<b>regression</b> %{customdata[0]}<br>%{customdata[1]}<br>%{customdata[2]}<extra></extra>",
        ))
    fig.update_layout(
        **LAYOUT,
        title={"text": f"GFLOPS by commit: {_t(f.gpu)}, {size_text(f.size)}, {_t(mode_words(f.mode))}{_in(f.precision)}"
                       f"{_form_in(f.form)}",
               "subtitle": {"text": f"{_form_said(f.form)}{len(h.commits)} newest commits, oldest first; band: ±noise; "
                                    f"{len(h.regressions)} regression(s) flagged"}},
        xaxis={"title": {"text": "commit (by commit time)"}, "type": "category", "categoryorder": "array",
               "categoryarray": [x_of[s] for s in h.commits]},
        yaxis={"title": {"text": "GFLOPS"}, "rangemode": "tozero"},
    )
    return fig


# -- overview: the latest ladder of one GPU -------------------------------------------------

def _in(precision: str) -> str:
    """A title's precision: said where it is not FP32, the default every chart opened on before."""
    return "" if precision == "fp32" else f", {precision.upper()}"


def _form_in(form: str) -> str:
    """A title's GEMM form, by its key: said where it is not the default (A, B, C row-major,
    alpha and beta, FP32 sums), which every chart showed before forms."""
    return "" if form == DEFAULT_KEY else f", form {form}"


def _form_said(form: str) -> str:
    """The start of a subtitle: the form in words, where it is not the default."""
    return "" if form == DEFAULT_KEY else f"{form_label(form)} · "


def ladder_figure(lad: Ladder, size: tuple[int, int, int], mode: str, precision: str = "fp32",
                  form: str = DEFAULT_KEY) -> Figure | str:
    if not lad.rungs:
        return f"No results on {lad.gpu_name} at {size_text(size)} ({mode} mode)."
    ok = [r for r in lad.rungs if r.verified and r.gflops is not None]
    failed = [r for r in lad.rungs if not r.verified]
    labels = [_t(r.variant) for r in lad.rungs]
    fig = Figure()
    if ok:
        fig.add_trace(bar(
            x=[_t(r.variant) for r in ok], y=[r.gflops for r in ok], name="GFLOPS", marker={"color": "#3b6ea8"},
            text=[f"{lad.pct_of_peak(r):.1f}% of peak" if lad.peak.gflops else f"{r.pct_of_cublas or 0:.0f}% of cuBLAS"
                  for r in ok],
            textposition="outside",
            customdata=[[r.pct_of_cublas or 0, lad.pct_of_peak(r) or 0, _t(r.sha or "no commit"), (r.noise or 0) * 100]
                        for r in ok],
            hovertemplate=("<b>%{x}</b> %{y:,.0f} GFLOPS<br>%{customdata[0]:.1f}% of cuBLAS · "
                           "%{customdata[1]:.1f}% of " + precision.upper() + " peak<br>"
                           "commit %{customdata[2]} · noise ±%{customdata[3]:.2f}%"
                           "<extra></extra>"),
        ))
    if failed:
        fig.add_trace(_failures([_t(r.variant) for r in failed], [[_text(r.error, 120)] for r in failed],
                                "<b>%{x}</b><br>%{customdata[0]}"))
    cublas = [r.cublas_gflops for r in ok if r.cublas_gflops]
    if cublas:
        mean = fmean(cublas)
        fig.add_trace(scatter(x=labels, y=[mean] * len(labels), mode="lines", name=f"cuBLAS {mean:,.0f} GFLOPS",
                                 line={"dash": "dash", "color": "gray"}, hoverinfo="name"))
    if lad.peak.gflops:
        fig.add_trace(scatter(x=labels, y=[lad.peak.gflops] * len(labels), mode="lines",
                                 name=f"{precision.upper()} peak {lad.peak.gflops:,.0f} GFLOPS",
                                 line={"dash": "dot", "color": "#b66a00"}, hoverinfo="name"))
    fig.update_layout(
        **LAYOUT,
        title={"text": f"{_t(lad.gpu_name)}: {size_text(size)}, {_t(mode_words(mode))}{_in(precision)}{_form_in(form)}",
               "subtitle": {"text": f"{_form_said(form)}each variant's newest result · {_t(lad.peak.how)}"}},
        xaxis={"title": {"text": "variant"}, "type": "category", "categoryorder": "array", "categoryarray": labels},
        yaxis={"title": {"text": "GFLOPS"}, "rangemode": "tozero"},
    )
    return fig


# -- sweep -----------------------------------------------------------------------------------

def _held_text(f: SweepFilter) -> str:
    return ", ".join(f"{d.upper()}={v}" for d, v in f.held().items())


def sweep_reason(f: SweepFilter) -> str:
    """Why a sweep has no points, naming only what the filters hold."""
    if f.mode is None:  # no result at all in this precision and form, so no mode to open on
        other = "" if what(f.precision, f.form) == "results" else " Or choose another precision or form."
        return f"No {what(f.precision, f.form)} yet: {GET_RESULTS}.{other}"
    unheld = [d.upper() for d, v in f.held().items() if v is None]
    if unheld:
        dims = " and ".join(unheld)
        return (f"Nothing measured in {f.mode} mode to hold {dims} at while {f.vary.upper()} varies: choose {dims} in "
                "the menus, or vary every size.")
    at = f" at {_held_text(f)}" if f.axis is not None else ""
    return (f"No {what(f.precision, f.form)}{at} in {f.mode} mode for the chosen GPUs, variants and commit: "
            f"choose other filters, or {GET_RESULTS}.")


def sweep_figure(points: list[SweepPoint], f: SweepFilter) -> Figure | str:
    if not points:
        return sweep_reason(f)
    ok = [p for p in points if p.verified and p.gflops is not None]
    failed = [p for p in points if not p.verified]
    if not ok:
        return f"All {len(failed)} newest results for these filters failed verification: a wrong kernel has no speed."
    # One dimension varied: its value on a log axis (skinny shapes span 1 to thousands).
    # Every size: categories in flop-count order, since sizes of one flop count need not be one point.
    if f.axis is None:
        x_of = lambda p: size_text(p.size)  # noqa: E731
    else:
        x_of = lambda p: p.size[f.axis]  # noqa: E731
    gpus = sorted({p.gpu for p in points})
    variants = sorted({p.variant for p in points})
    fig = Figure()
    for (gpu, variant) in sorted({(p.gpu, p.variant) for p in ok}):
        pts = [p for p in ok if p.gpu == gpu and p.variant == variant]
        fig.add_trace(scatter(
            x=[x_of(p) for p in pts], y=[p.gflops for p in pts], mode="lines+markers",
            name=f"{_t(variant)} · {_t(gpu)}", legendgroup=variant,
            line={"color": _color(variants.index(variant)), "dash": ["solid", "dash", "dot", "dashdot"][gpus.index(gpu) % 4]},
            customdata=[[_t(p.sha or "no commit"), (p.noise or 0) * 100, p.cublas_gflops or 0, size_text(p.size)]
                        for p in pts],
            hovertemplate=("<b>%{fullData.name}</b> %{customdata[3]}<br>%{y:,.0f} GFLOPS (cuBLAS %{customdata[2]:,.0f})<br>"
                           "commit %{customdata[0]} · noise ±%{customdata[1]:.2f}%<extra></extra>"),
        ))
    if failed:
        fig.add_trace(_failures([x_of(p) for p in failed],
                                [[f"{_t(p.variant)} · {_t(p.gpu)}", _text(p.error, 120), size_text(p.size)] for p in failed],
                                "<b>%{customdata[0]}</b> %{customdata[2]}<br>%{customdata[1]}"))
    if f.axis is None:
        sizes = sorted({p.size for p in points}, key=by_flops)
        title = f"GFLOPS by size, {_t(mode_words(f.mode))}{_in(f.precision)}"
        xaxis = {"title": {"text": "M×N×K (by flop count)"}, "type": "category", "categoryorder": "array",
                 "categoryarray": [size_text(s) for s in sizes]}
    else:
        dim = f.vary.upper()
        values = sorted({p.size[f.axis] for p in points})
        title = f"GFLOPS against {dim} at {_held_text(f)}, {_t(mode_words(f.mode))}{_in(f.precision)}"
        # Ticks at the measured values only: a log axis's own 10, 100, 1000 hide 16 and 4096.
        xaxis = {"title": {"text": f"{dim} (log scale)"}, "type": "log", "tickvals": values, "ticktext": [str(v) for v in values]}
    fig.update_layout(
        **LAYOUT,
        title={"text": title + _form_in(f.form),
               "subtitle": {"text": f"{_form_said(f.form)}each point: the newest result for its GPU, variant and size"}},
        xaxis=xaxis,
        yaxis={"title": {"text": "GFLOPS"}, "rangemode": "tozero"},
    )
    return fig


# -- compare ---------------------------------------------------------------------------------

DIRECTIONS = {"slower": "#c62828", "within noise": "#8a8a8a", "under the band": "#b0b0b0", "faster": "#2e7d32"}
ROW_PX = 18  # one category row: 11 px labels never touch at this pitch (a browser test measures it)


def compare_figure(c: Comparison) -> Figure | str:
    """B's speed over A's per variant and size: a dot with its interval, a line at 1, rows sorted
    from the biggest slowdown to the biggest speed-up, one trace per direction (the legend groups)."""
    if c.reason:
        return c.reason
    rows = sorted((r for r in c.rows if r.change), key=lambda r: r.change.ratio)
    labels = [_t(r.label) for r in rows]
    fig = Figure()
    for direction, color in DIRECTIONS.items():
        mine = [r for r in rows if r.change.direction == direction]
        if not mine:
            continue
        ch = [r.change for r in mine]
        fig.add_trace(scatter(
            x=[x.ratio for x in ch], y=[_t(r.label) for r in mine], mode="markers", name=f"B {direction}",
            marker={"color": color, "size": 8},
            error_x={"type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 3,
                     "array": [x.high - x.ratio if x.high is not None else 0 for x in ch],
                     "arrayminus": [x.ratio - x.low if x.low is not None else 0 for x in ch]},
            customdata=[[x.low or x.ratio, x.high or x.ratio, 100 * (x.confidence or 0), r.a.gflops, r.b.gflops,
                         r.a.pct_of_cublas or 0, r.b.pct_of_cublas or 0, r.a.pct_of_peak or 0, r.b.pct_of_peak or 0]
                        for x, r in zip(ch, mine)],
            hovertemplate=("<b>%{y}</b><br>B/A %{x:.3f} [%{customdata[0]:.3f}, %{customdata[1]:.3f}], "
                           "confidence %{customdata[2]:.1f}%<br>A %{customdata[3]:,.0f} GFLOPS "
                           "(%{customdata[5]:.1f}% of cuBLAS, %{customdata[7]:.1f}% of peak)<br>B %{customdata[4]:,.0f}"
                           " GFLOPS (%{customdata[6]:.1f}% of cuBLAS, %{customdata[8]:.1f}% of peak)<extra></extra>"),
        ))
    left_out = len(c.rows) - len(rows)
    note = f" · {left_out} with no verified speed on one side: in the table" if left_out else ""
    fig.update_layout(
        **{**LAYOUT, "height": max(360, ROW_PX * len(rows) + 210), "margin": {**LAYOUT["margin"], "t": 150}},
        title={"text": f"B/A speed: {_t(c.f.b)} over {_t(c.f.a)} ({WHAT[c.f.by]}), {_t(c.where)}" + _in(c.f.precision)
                       + _form_in(c.f.form),
               "subtitle": {"text": f"{_form_said(c.f.form)}right of 1: B is faster · bars: ~95 % interval from each "
                                    f"side's samples · under the band: clear but under {100 * c.band:g} %" + note}},
        xaxis={"title": {"text": "B's speed / A's speed (log scale)"}, "type": "log", "side": "top"},
        yaxis={"title": {"text": "variant and size"}, "type": "category", "categoryorder": "array", "categoryarray": labels,
               "range": [len(labels) - 0.5, -0.5],  # top to bottom, no padding (autorange pads 5 %)
               "tickfont": {"size": 11}, "dtick": 1},
        shapes=[{"type": "line", "xref": "x", "yref": "paper", "x0": 1, "x1": 1, "y0": 0, "y1": 1,
                 "line": {"color": "#2a3f5f", "width": 1, "dash": "dot"}}],
    )
    return fig


# -- one job ---------------------------------------------------------------------------------

ENDED_WITHOUT_RESULTS = {
    "failed": "No results: the job failed before any case finished (its error is above).",
    "cancelled": "No results: the job was cancelled before any case finished.",
    "succeeded": "No results: the job ended without any.",
}


def job_figure(results: list, status: str = "running") -> Figure | str:
    if not results:
        # An ended job will get no more: saying "yet" would have its reader wait for nothing.
        return ENDED_WITHOUT_RESULTS.get(status, "No results yet: they appear here case by case as the worker finishes them.")
    ok = [r for r in results if r.verified and r.gflops is not None]
    failed = [r for r in results if not r.verified]
    # A job may time one kernel in two forms at one size (alone and in a batch): two bars.
    label = lambda r: _t(f"{r.variant} {size_label((r.m, r.n, r.k))}" + _form_in(r.form or DEFAULT_KEY))  # noqa: E731
    fig = Figure()
    if ok:
        fig.add_trace(bar(x=[label(r) for r in ok], y=[r.gflops for r in ok], name="variant",
                             marker={"color": "#3b6ea8"}, text=[f"{r.pct_of_cublas or 0:.0f}% of cuBLAS" for r in ok],
                             textposition="outside"))
        fig.add_trace(bar(x=[label(r) for r in ok], y=[r.cublas_gflops for r in ok], name="cuBLAS (same case)",
                             marker={"color": "#c8c8c8"}))
    if failed:
        fig.add_trace(_failures([label(r) for r in failed], [[_text(r.error, 120)] for r in failed],
                                "<b>%{x}</b><br>%{customdata[0]}"))
    fig.update_layout(**LAYOUT, barmode="group", title={"text": "GFLOPS per case"},
                      xaxis={"title": {"text": "case"}, "type": "category", "categoryarray": [label(r) for r in results],
                             "categoryorder": "array"},
                      yaxis={"title": {"text": "GFLOPS"}, "rangemode": "tozero"})
    return fig

"""The roofline chart (dashboard/roofline.py has its data, dashboard/roofs.py its formulas):
log-log, the memory roof's slope up to each precision's compute roof, a series per variant
grouped in the legend by precision, cuBLAS as stars."""

from core.description.timing_modes import mode_words
from dashboard.figures import LAYOUT, Figure, _color, _form_in, _form_said, _t, scatter
from dashboard.filters import size_text
from dashboard.roofline import Roofline, RoofPoint

SYMBOLS = {"fp32": "circle", "tf32": "square", "fp16": "diamond", "bf16": "triangle-up", "fp8": "star"}
ROOF = {"color": "#2a3f5f", "width": 1.5}


def _hover(p: RoofPoint) -> list:
    return [_t(p.variant), size_text(p.size), p.precision.upper(), p.pct_of_peak or 0, p.pct_of_cublas or 0,
            _t((p.sha or "no commit")[:12])]


HOVER = ("<b>%{customdata[0]}</b> %{customdata[1]} %{customdata[2]}<br>%{y:,.0f} GFLOPS at %{x:,.0f} flop/byte<br>"
         "%{customdata[3]:.1f}% of peak · %{customdata[4]:.1f}% of cuBLAS<br>commit %{customdata[5]}<extra></extra>")


def roofline_figure(r: Roofline) -> Figure | str:
    if r.reason:
        return r.reason
    peaks = {pm: pk.gflops for pm, pk in r.peaks.items() if pk.gflops}
    bw = r.memory.gbs if r.memory else None
    ridges = [g / bw for g in peaks.values()] if bw else []
    xs = [p.intensity for p in r.points]
    lo, hi = min([*xs, *ridges]) / 3, max(xs) * 3
    fig = Figure()
    if bw:
        top = max(peaks.values(), default=bw * hi)
        x_end = min(hi, top / bw)
        fig.add_trace(scatter(x=[lo, x_end], y=[bw * lo, bw * x_end], mode="lines", line=ROOF, legendgroup="roofs",
                              legendgrouptitle={"text": "roofs"}, name=f"memory {bw / 1e3:,.2f} TB/s",
                              hovertemplate="memory roof: %{y:,.0f} GFLOPS at %{x:,.1f} flop/byte<extra></extra>"))
    for pm, gflops in peaks.items():
        fig.add_trace(scatter(x=[max(lo, gflops / bw) if bw else lo, hi], y=[gflops, gflops], mode="lines",
                              line={**ROOF, "dash": "dash"}, legendgroup="roofs", legendgrouptitle={"text": "roofs"},
                              name=f"{pm.upper()} peak {gflops / 1e3:,.0f} TFLOPS",
                              hovertemplate=f"{pm.upper()} compute roof: %{{y:,.0f}} GFLOPS<extra></extra>"))
    series: dict[tuple[str, str], list[RoofPoint]] = {}
    for p in r.points:
        series.setdefault((p.precision, p.variant), []).append(p)
    for i, ((pm, variant), pts) in enumerate(sorted(series.items())):
        fig.add_trace(scatter(x=[p.intensity for p in pts], y=[p.gflops for p in pts], mode="markers+lines",
                              name=_t(variant), legendgroup=pm, legendgrouptitle={"text": pm.upper()},
                              marker={"symbol": SYMBOLS.get(pm, "circle"), "size": 9, "color": _color(i)},
                              line={"width": 1, "color": _color(i)}, customdata=[_hover(p) for p in pts],
                              hovertemplate=HOVER))
    for pm in sorted({p.precision for p in r.points}):
        pts = sorted((p for p in r.cublas() if p.precision == pm), key=lambda p: p.intensity)
        fig.add_trace(scatter(x=[p.intensity for p in pts], y=[p.gflops for p in pts], mode="markers",
                              name=f"cuBLAS {pm.upper()}", legendgroup=pm, legendgrouptitle={"text": pm.upper()},
                              marker={"symbol": "star", "size": 13, "color": "#111", "line": {"width": 1, "color": "white"}},
                              customdata=[_hover(p) for p in pts], hovertemplate=HOVER))
    where = ", ".join(w for w in (mode_words(r.f.mode), size_text(r.f.size) if r.f.size else "every size",
                                  f"commit {r.f.sha}" if r.f.sha else "newest results") if w)
    how = "each point: a variant's newest result · stars: cuBLAS in the same jobs · the roofs' arithmetic is under the chart"
    if r.memory and r.memory.gbs is None:
        how += " · memory roof unknown: no memory bus recorded"
    if r.failed:
        how += f" · not drawn, failed verification: {len(r.failed)} case(s)"
    fig.update_layout(
        **{**LAYOUT, "height": 560, "margin": {**LAYOUT["margin"], "t": 90}, "legend": {"groupclick": "toggleitem"}},
        title={"text": f"Roofline: {_t(r.gpu_name)}, {_t(where)}{_form_in(r.f.form)}",
               "subtitle": {"text": _form_said(r.f.form) + _t(how)}},
        xaxis={"title": {"text": "arithmetic intensity (flop per byte: A and B read once, C written once)"},
               "type": "log"},
        yaxis={"title": {"text": "GFLOPS"}, "type": "log"},
    )
    return fig

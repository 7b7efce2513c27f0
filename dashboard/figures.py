"""Plotly figure builders. Each returns a Figure, or the reason there is nothing to draw."""

import plotly.graph_objects as go

from dashboard.queries import HistoryFilter, HistoryPoint


def history_figure(points: list[HistoryPoint], f: HistoryFilter) -> go.Figure | str:
    if not points and f.m is None:
        return "No verified results with a commit yet: post a job with a commit, and its points appear here."
    if not points:
        return (
            f"No verified results for GPU {f.gpu or 'any'} at {f.m}x{f.n}x{f.k} ({f.mode or 'any'} mode) "
            "that carry a commit: post a job with a commit, or pick another GPU or size."
        )
    commits: list[str] = []
    for p in points:  # points arrive in commit order
        if p.sha not in commits:
            commits.append(p.sha)

    fig = go.Figure()
    by_variant: dict[str, list[HistoryPoint]] = {}
    for p in points:
        by_variant.setdefault(p.variant, []).append(p)
    for variant, series in by_variant.items():
        fig.add_trace(
            go.Scatter(
                x=[p.sha[:10] for p in series],
                y=[p.gflops for p in series],
                mode="lines+markers",
                name=variant,
                customdata=[[p.sha, str(p.commit_time)[:19], p.pct_of_cublas or 0, (p.noise or 0) * 100] for p in series],
                hovertemplate=(
                    "<b>%{fullData.name}</b><br>%{customdata[0]}<br>%{customdata[1]}<br>"
                    "%{y:,.0f} GFLOPS (%{customdata[2]:.1f}% of cuBLAS)<br>noise %{customdata[3]:.2f}%<extra></extra>"
                ),
            )
        )
    # cuBLAS measured in the same jobs, one point per commit: the line to beat.
    cublas: dict[str, list[float]] = {}
    for p in points:
        if p.cublas_gflops:
            cublas.setdefault(p.sha, []).append(p.cublas_gflops)
    if cublas:
        shas = [s for s in commits if s in cublas]
        fig.add_trace(
            go.Scatter(
                x=[s[:10] for s in shas],
                y=[sum(cublas[s]) / len(cublas[s]) for s in shas],
                mode="lines",
                name="cuBLAS (same jobs)",
                line={"dash": "dash", "color": "gray"},
            )
        )
    fig.update_layout(
        title=f"GFLOPS by commit: {f.gpu}, {f.m}x{f.n}x{f.k}, {f.mode} L2",
        xaxis={"title": "commit (oldest first)", "type": "category", "categoryorder": "array",
               "categoryarray": [s[:10] for s in commits]},
        yaxis={"title": "GFLOPS", "rangemode": "tozero"},
        hovermode="closest",
        margin={"l": 60, "r": 20, "t": 60, "b": 60},
        template="plotly_white",
    )
    return fig

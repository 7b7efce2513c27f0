"""`gemmwatch check`: a kernels folder built here, with no GPU and no server, as a worker would build it
(worker/compile/offline_check.py), before a job or a CI run spends GPU time on it."""

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.markup import colored, escape
from cli.messages import console as make_console


def check(
    kernels_dir: Annotated[Path, typer.Option(help="folder with the kernels and their gemmwatch.json")] = Path("."),
    arch: Annotated[str, typer.Option(help="compute capability to build for (8.0, 8.9 or 9.0); a description's "
                                           "SM_COUNT and the rest are that reference card's")] = "9.0",
    variants: Annotated[str | None, typer.Option(help="comma-separated names of the folder's kernels (default: all)")]
    = None,
    jobs: Annotated[int, typer.Option(min=0, help="kernels built at once (0: as many as this machine has CPUs)")] = 0,
):
    """Build each kernel of a kernels folder here, with no GPU and no server, as a worker would: its
    description checked, its source compiled (NVRTC, nvcc or Triton), its entry found and its args
    fitted to the parameters the build records. Exit 0: every kernel builds; 1: one does not; 2: the
    folder or the options are refused. A wrong result or a fault needs the GPU: `gemmwatch run`."""
    from core.description.kernel_folder import FolderError, load_folder
    from core.settings import settings
    from worker.compile.offline_check import check_kernel, reference

    out, errors = make_console(), make_console(stderr=True)
    cfg = settings if "GEMMWATCH_DATA_DIR" in os.environ else settings.model_copy(update={"data_dir": user_cache()})
    names = [v.strip() for v in (variants or "").split(",") if v.strip()]
    try:
        card, figures = reference(arch)
        kernels = load_folder(kernels_dir, names or None)
    except (FolderError, ValueError) as exc:
        errors.print(str(exc), markup=False, highlight=False)
        raise typer.Exit(2) from None
    missing = sorted(set(names) - {k.name for k in kernels})
    if missing:
        errors.print(f"{kernels_dir}: no kernel named {', '.join(missing)} in its gemmwatch.json", markup=False)
        raise typer.Exit(2)
    table = Table(title=f"{len(kernels)} kernels of {kernels_dir}, built for compute capability {figures.compute_capability}"
                        f" ({card}'s figures)")
    for col in ("kernel", "builds", "compiler", "detail"):
        table.add_column(col)
    failures = []
    # Each build is a compile process of its own: threads only wait for them, in the folder's order.
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda desc: check_kernel(desc, figures, cfg), kernels))
    for checked in results:
        word = "not checked" if checked.skipped else "yes" if checked.builds else "no"
        first_line = headline(checked.detail)
        table.add_row(escape(checked.name), colored("yellow" if checked.skipped else "green" if checked.builds else "red",
                                                     word), escape(checked.compiler), escape(first_line))
        if not checked.builds and not checked.skipped:
            failures.append(checked)
    out.print(table)
    shown: dict[str, str] = {}  # each error in full below the table (a compiler's log is many lines), once
    for checked in failures:
        out.print(f"\n{checked.name}:", markup=False, highlight=False)
        out.print(f"the same as {shown[checked.detail]}'s" if checked.detail in shown else checked.detail, markup=False,
                  highlight=False)
        shown.setdefault(checked.detail, checked.name)
    if failures:
        raise typer.Exit(1)


def user_cache() -> Path:
    """Where check keeps its builds unless GEMMWATCH_DATA_DIR says: the user's cache folder (XDG's),
    not the data folder's default `.gemmwatch` in the working directory, which is most often the
    repository being checked (its builds would show there as untracked files)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gemmwatch"


def headline(detail: str) -> str:
    """The line of an error that says what is wrong: a compiler's first error (its log starts with
    "In file included from ..." or a warning), else the first line."""
    lines = [line.strip() for line in detail.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[0] if lines else ""

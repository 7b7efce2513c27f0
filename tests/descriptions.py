"""Kernel descriptions for tests, in the one form every path carries (core/kernel.py)."""


def one_file(name: str, text: str, entry: str, block: list, tile: list | None = None, **extra) -> dict:
    """A kernel of one file, `<name>.cu`, one block per `tile` of C unless a grid is given."""
    grid = extra.pop("grid", None) or {"tile": tile or [16, 16]}
    return {"name": name, "files": {f"{name}.cu": text}, "source": f"{name}.cu", "entry": entry, "block": block,
            "grid": grid, **extra}

"""Kernel descriptions for tests, in the one form every path carries (core/description/kernel.py)."""


def one_file(name: str, text: str, entry: str, block: list, tile: list | None = None, **extra) -> dict:
    """A kernel of one file, `<name>.cu`, one block per `tile` of C unless a grid is given."""
    grid = extra.pop("grid", None) or {"tile": tile or [16, 16]}
    return {"name": name, "files": {f"{name}.cu": text}, "source": f"{name}.cu", "entry": entry, "block": block,
            "grid": grid, **extra}


def builtin_variant(name: str, output: str = "input", marker: str = "", **defines):
    """A built-in kernel as a KernelChoice, changed the way the precision tests change it: C in
    `output`'s type (with the OUTPUT_FP32 define the FP16, BF16 and FP8 built-ins read, and fp8_naive's
    OUTPUT_FP16), extra
    -D values, and `marker` put before its source (the CPU double's FAKE_GPU_ markers)."""
    from core.description.builtins import builtin_kernels
    from worker.measure.cases import KernelChoice

    desc = builtin_kernels()[name]
    files = {**desc.files, desc.source: marker + desc.files[desc.source]} if marker else desc.files
    extra = {f"OUTPUT_{output.upper()}": 1} if output != "input" else {}
    changed = desc.model_copy(update={"output": output, "files": files, "defines": {**desc.defines, **extra, **defines}})
    return KernelChoice(type(desc).model_validate(changed.model_dump()), {}, "builtin")

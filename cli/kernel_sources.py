"""Read a commit's own kernels from a folder, as the `sources` of a job.

Either a manifest, DIR/gemmwatch.json:
  [{"name": "my_gemm", "file": "my_gemm.cu", "entry": "my_gemm", "block": [16, 16],
    "tile": [64, 64], "defines": {"BK": 8}}, ...]
or a gemmwatch-style registry, DIR/registry.py (as in this project's kernels/), whose
VARIANTS resolve to launch descriptions with their default tunables.
"""

import importlib.util
import json
import sys
from pathlib import Path


def load_sources(folder: Path) -> list[dict]:
    manifest, registry = folder / "gemmwatch.json", folder / "registry.py"
    if manifest.exists():
        entries = json.loads(manifest.read_text())
        return [
            {"name": e["name"], "source": (folder / e["file"]).read_text(), "entry": e["entry"],
             "block": e["block"], "tile": e["tile"], "defines": e.get("defines", {})}
            for e in entries
        ]
    if registry.exists():
        # The commit's own registry, loaded from its file so it is this commit's kernels that run.
        spec = importlib.util.spec_from_file_location(f"_gemmwatch_registry_{abs(hash(str(folder)))}", registry)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
        sources = []
        for kernel in module.VARIANTS.values():
            if kernel.source_file is None:
                continue
            launch = kernel.resolve()
            sources.append({"name": kernel.name, "source": launch.source, "entry": launch.entry,
                            "block": list(launch.block), "tile": list(launch.tile), "defines": launch.defines})
        return sources
    raise FileNotFoundError(f"{folder}: neither gemmwatch.json nor registry.py describes its kernels")

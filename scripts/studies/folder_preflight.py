#!/usr/bin/env python3
"""Before a repository's kernels are run beside its own runner (home_build_*.sh): its kernels folder
loaded as `gemmwatch ci` and `gemmwatch run` load it, and the nvcc gemmwatch builds with, with where
cuBLAS's headers come from for it. The last two lines are for the shell: GW_NVCC=..., GW_CUBLAS=0|1
(1: gemmwatch's build finds <cublas_v2.h>, in nvcc's own toolkit or beside it).
  python3 scripts/studies/folder_preflight.py FOLDER
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.description.kernel_folder import load_folder  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.compile import nvcc  # noqa: E402
from core.description.kernel_includes import nvcc_include_dirs  # noqa: E402

kernels = load_folder(Path(sys.argv[1]))
print(f"manifest: {len(kernels)} kernels load as `gemmwatch ci` loads them: {', '.join(k.name for k in kernels)}")
path = nvcc.nvcc_path(Settings())
own = bool(path) and any((Path(d) / nvcc.CUBLAS_HEADER).is_file() for d in nvcc_include_dirs(path))
beside = nvcc.cublas_headers(path) if path else None
print(f"gemmwatch's nvcc: {path} (cuBLAS's headers: {'its toolkit' if own else beside or 'none found'})")
print(f"GW_NVCC={path or ''}")
print(f"GW_CUBLAS={int(own or beside is not None)}")

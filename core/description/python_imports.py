"""Which of a folder's Python files a Triton or Helion kernel file reaches through its imports, read
without running anything (its syntax tree): what its description carries beside it.

triton-lang/kernels' matmul.py takes its autotuning's perf model with `from .matmul_perf_model import
...`; a script beside its helpers says `import helpers`. The compile process resolves both the same
way (worker/compile/triton_module.JobFiles): a relative import from the importing file's folder, a plain
name from the kernel file's folder (a script's folder heads its sys.path). A folder is a package whose
__init__.py is not read, so `from .sub import mod` reaches sub/mod.py and nothing else.
"""

import ast
import posixpath
from collections.abc import Callable


def imported_paths(path: str, text: str, source: str, is_file: Callable[[str], bool]) -> list[str]:
    """The folder's files that `path` (whose text is `text`) imports, each a path from the folder's root
    for which is_file holds; `source` is the kernel's own file, whose folder plain names are found in.
    A file that does not parse imports nothing here: the description's check names its error."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found: list[str] = []
    for node in ast.walk(tree):  # a wrapper's import inside a function runs when it is called
        for base, is_module, names in _targets(node, posixpath.dirname(path), posixpath.dirname(source)):
            modules = [f"{base}.py"] if is_module else []
            for candidate in [*modules, *[posixpath.join(base, f"{name}.py") for name in names]]:
                if is_file(candidate) and candidate not in found:
                    found.append(candidate)
    return found


def _targets(node: ast.AST, folder: str, top: str) -> list[tuple[str, bool, list[str]]]:
    """Per module a statement imports: its path without .py, whether that may be a file (`from . import x`
    names a folder), and the names taken from it (each may be a module of that folder)."""
    if isinstance(node, ast.Import):
        return [(posixpath.join(top, *alias.name.split(".")), True, []) for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    names = [alias.name for alias in node.names if alias.name != "*"]
    module = (node.module or "").split(".") if node.module else []
    if node.level == 0:
        return [(posixpath.join(top, *module), True, names)]
    parts = [p for p in folder.split("/") if p]
    if node.level - 1 > len(parts):
        return []  # above the folder's root: nothing of the folder's
    base = parts[:len(parts) - (node.level - 1)]
    return [("/".join([*base, *module]), bool(module), names)]

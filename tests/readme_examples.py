"""The shell examples of README.md, as tests/test_readme.py runs them.

Every fenced block whose info string is `sh` alone is an example for the machine that ran
`make up`, run verbatim. A word after `sh` says where else a block runs, and such a block is
not run here:
  setup     `make up` and `make test` themselves (the test runs `make up PORT=...` in the
            background, and `make test` is what runs the test)
  gpu-node  a GPU node with docker (`docker compose up`)
An unknown word fails the test, so no block is left out by a typo.
"""

import re
from dataclasses import dataclass

ELSEWHERE = {"setup", "gpu-node"}
_FENCE = re.compile(r"^```(\S*)[ \t]*(.*?)\n(.*?)^```[ \t]*$", re.S | re.M)

# Run before each example in bash: a curl that got an HTTP error fails the example (curl
# itself exits 0 on a 401), and a gemmwatch command may fail only as documented for a machine
# without a GPU ("no CUDA device": `make up`'s worker fails every job so).
PRELUDE = r"""
set -e -o pipefail
shopt -s inherit_errexit
curl() { command curl --silent --show-error --fail-with-body "$@" || return $?; echo; }
gemmwatch() {
  local out rc=0
  out=$(command gemmwatch "$@" 2>&1) || rc=$?
  printf '%s\n' "$out"
  if [ "$rc" != 0 ] && [ -z "$GEMMWATCH_README_HAVE_GPU" ] && grep -q "no CUDA device" <<<"$out"; then
    echo "(exit $rc: the documented answer on a machine without a GPU)"
    return 0
  fi
  return "$rc"
}
"""


@dataclass(frozen=True)
class Block:
    where: str  # "" for this machine, else a word of ELSEWHERE
    text: str
    line: int  # where it starts in README.md, for the failure message


def shell_blocks(readme: str) -> list[Block]:
    blocks = []
    for m in _FENCE.finditer(readme):
        lang, where, text = m.group(1), m.group(2).strip(), m.group(3)
        if lang not in ("sh", "bash", "shell"):
            continue
        if where and where not in ELSEWHERE:
            raise ValueError(f"README.md line {readme[:m.start()].count(chr(10)) + 1}: unknown place {where!r} "
                             f"after ```{lang} (known: {', '.join(sorted(ELSEWHERE))})")
        blocks.append(Block(where, text, readme[:m.start()].count("\n") + 1))
    return blocks


def runnable(readme: str) -> list[Block]:
    return [b for b in shell_blocks(readme) if not b.where]


def front_page_hint(html: str) -> str:
    """The command the empty front page suggests."""
    found = re.search(r"\((?:e\.g\. )?(gemmwatch submit [^)<]*)\)", html)
    if not found:
        raise AssertionError("the front page suggests no `gemmwatch submit` command")
    return found.group(1)

"""Layer 1 of three against a hostile job source: its preprocessor directives, as the compiler sees them.

A job may bring CUDA source, and NVRTC opens any file a directive names (`#include`,
`__has_include`, ...). Checking the raw text is not enough: the compiler first joins lines
that end in a backslash (even inside a word), treats every comment as a space, reads `%:` as
`#`, and (in some modes) `??=` as `#`. So this module applies those early translation phases
itself, splits the result into preprocessing tokens, and then allows only a short list of
directives. Where compilers differ (trigraphs on or off; a backslash followed by spaces before
the newline joining lines or not), the source is analysed under every reading and refused if
any reading finds something forbidden: an attacker gains nothing from the ambiguity.

Every problem of a source is reported at once, each with its line: a kernel engineer fixes a
folder in one pass, not one refusal per try.

Layers 2 (a confined compile process, worker/compile/compiler.py) and 3 (compile logs that only show
the job's own source) hold even if this one is bypassed; this one gives the clear 422.
"""

import bisect
import functools
import itertools
import re
from dataclasses import dataclass

ALLOWED_DIRECTIVES = frozenset(
    {"define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "pragma", "error", "warning", "line",
     "include"}
)
# Pragmas that only steer code generation or diagnostics; none names or reads a file. `warning`
# is MSVC's (cuda-samples' helper_functions.h holds one under #ifdef WIN32, which the guard does not
# evaluate); GCC and NVRTC ignore it. `nv_exec_check_disable` and `hd_warning_disable` silence
# nvcc's host/device checks, as Thrust's and CUTLASS's headers do.
ALLOWED_PRAGMAS = frozenset(
    {"once", "unroll", "nounroll", "push_macro", "pop_macro", "pack",
     "nv_diag_suppress", "nv_diag_warning", "nv_diag_error", "nv_diag_default", "nv_diag_once",
     "diag_suppress", "diag_warning", "diag_error", "diag_default",
     "warning", "nv_exec_check_disable", "hd_warning_disable"}
)
# Operators that can probe or read a file, or run a pragma built from a string.
FORBIDDEN_IDENTIFIERS = frozenset({"__has_include", "__has_include_next", "__has_embed", "__pragma"})

_TRIGRAPHS = {"=": "#", "/": "\\", "'": "^", "(": "[", ")": "]", "!": "|", "<": "{", ">": "}", "-": "~"}
_TRIGRAPH = re.compile(r"\?\?([=/'()!<>\-])")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_SPLICE_STRICT = re.compile(r"\\\n")
_SPLICE_LENIENT = re.compile(r"\\[ \t\f\v]*\n")  # GCC and Clang accept spaces between \ and newline
_SPLICE_SPACED = re.compile(r"\\[ \t\f\v]+\n")  # where the lenient reading differs from the strict one

_TOKEN = re.compile(
    r"""
    (?P<newline>\n[\n \t\f\v]*)
  | (?P<space>[ \t\f\v]+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*.*?\*/)
  | (?P<open_comment>/\*)
  | (?P<raw_string>(?:u8|u|U|L)?R")
  | (?P<string>(?:u8|u|U|L)?"(?:[^"\\\n]|\\[^\n])*(?:"|(?=\n)|$))
  | (?P<char>(?:u8|u|U|L)?'(?:[^'\\\n]|\\[^\n])*(?:'|(?=\n)|$))
  | (?P<number>\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*)
  | (?P<identifier>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<paste>\#\#|%:%:)
  | (?P<hash>\#|%:)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


# The problems a refusal spells out: a file of 300,000 control characters is refused in a few lines,
# not in a 17.9 MB answer (issue 49, row 1).
MAX_PROBLEMS_SHOWN = 50
MAX_CONTROLS_NAMED = 20


@dataclass(frozen=True, order=True)
class Problem:
    """One thing the guard refuses: where (the kernel's file, "" where a lone text was checked;
    the line) and why. Ordered by file, then line."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}, line {self.line}: {self.reason}" if self.file else f"line {self.line}: {self.reason}"


class SourceRefused(ValueError):
    """Sources the guard will not pass on to the compiler: every problem found, sorted by file and
    line (`problems`), one per line of the message; `line`, `reason` and `file` are the first's."""

    def __init__(self, *problems: Problem):
        self.problems = tuple(sorted(set(problems)))
        shown = [str(p) for p in self.problems[:MAX_PROBLEMS_SHOWN]]
        more = len(self.problems) - len(shown)
        super().__init__("\n".join(shown + ([f"... and {more} more problems of the same files"] if more else [])))
        first = self.problems[0]
        self.line, self.reason, self.file = first.line, first.reason, first.file or None

    def __reduce__(self):  # pickled with its problems, not its message
        return type(self), self.problems


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    line: int
    starts_line: bool  # first token of a logical line (only spaces and comments before it)
    start: int = 0  # offset in the reading's text (after splices)


@dataclass(frozen=True)
class Include:
    """An #include the source makes, by the name it spells: "x.cuh" (quoted) or <x.h> (angled).
    Where it may lead is decided elsewhere (core/description/kernel_includes.py); here it is only read."""

    line: int
    name: str
    angled: bool


# What an #include may spell: a path of plain characters, no backslash, not absolute; a space only
# alone between two of a name's characters ("helper_cuda ptx.h"), as description_fields.FilePath allows.
INCLUDE_NAME = re.compile(r"[A-Za-z0-9_.](?:[A-Za-z0-9_.+/-]|(?<=[A-Za-z0-9_.+-]) (?=[A-Za-z0-9_.+-])){0,199}")


def check_source(text: str) -> frozenset[Include]:
    """Raise SourceRefused naming every line where a reading of the source holds something
    forbidden; else the #includes it makes, under every reading (each one must then be allowed)."""
    includes, problems = scan_source(text)
    if problems:
        raise SourceRefused(*problems)
    return includes


# Texts longer than this are scanned each time, not remembered: 512 remembered files of a job's 2 MB
# limit would hold a gigabyte; a repository's headers are each far shorter (ThunderKittens' longest: 87 KB).
REMEMBERED_TEXT_MOST = 256 << 10


def scan_source(text: str) -> tuple[frozenset[Include], tuple[Problem, ...]]:
    """The #includes of every reading, and every problem any reading finds (the same one found by
    several readings once), sorted by line. A caller that also judges the includes can then name
    all that is wrong with a file at once. Remembered by text, up to REMEMBERED_TEXT_MOST: kernels
    share headers, and a folder's are read when it is loaded and again when each description is checked."""
    return _scan(text) if len(text) > REMEMBERED_TEXT_MOST else _scan_remembered(text)


@functools.lru_cache(maxsize=512)
def _scan_remembered(text: str) -> tuple[frozenset[Include], tuple[Problem, ...]]:
    return _scan(text)


def _scan(text: str) -> tuple[frozenset[Include], tuple[Problem, ...]]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # every newline convention counts
    # No kernel needs a control character, and compilers differ on some (Ctrl-Z ends a file for one
    # of them): one that may or may not count as whitespace or a line end is one reading too many.
    # Each one's line by bisection over the newlines, found once: counting the newlines before every
    # control character made the guard quadratic (300,000 of "\x01\n" took 166 s; issue 49, row 1).
    # At most MAX_CONTROLS_NAMED of them are named, then one line counts the rest.
    newlines = [m.start() for m in re.finditer("\n", text)]
    controls = list(itertools.islice(_CONTROL.finditer(text), MAX_CONTROLS_NAMED + 1))
    problems = {Problem("", bisect.bisect_left(newlines, m.start()) + 1,
                        "NUL character in the source" if m.group() == "\0"
                        else f"control character {m.group()!r} in the source")
                for m in controls[:MAX_CONTROLS_NAMED]}
    if len(controls) > MAX_CONTROLS_NAMED:
        rest = len(_CONTROL.findall(text)) - MAX_CONTROLS_NAMED
        problems.add(Problem("", bisect.bisect_left(newlines, controls[-1].start()) + 1,
                             f"{rest} more control characters from here on"))
    # A control character is refused above; read as a space it cannot hide anything from the readings.
    text = _CONTROL.sub(" ", text)
    # Every reading a compiler might make, but each distinct one once: a source with no trigraph
    # and no backslash-spaces-newline has one reading, not four (the work per byte stays bounded).
    trigraph_readings = (True, False) if _TRIGRAPH.search(text) else (False,)
    splice_readings = (_SPLICE_LENIENT, _SPLICE_STRICT) if _SPLICE_SPACED.search(text) else (_SPLICE_STRICT,)
    includes = set()
    for trigraphs in trigraph_readings:
        for splice in splice_readings:
            includes |= _check_reading(text, trigraphs, splice, problems)
    return frozenset(includes), tuple(sorted(problems))


def _check_reading(text: str, trigraphs: bool, splice: re.Pattern, problems: set[Problem]) -> set[Include]:
    if trigraphs:
        text = _TRIGRAPH.sub(lambda m: _TRIGRAPHS[m.group(1)], text)
    joined, newlines, splices = _splice(text, splice)

    def refuse(line: int, reason: str) -> None:
        problems.add(Problem("", line, reason))

    tokens = list(_tokens(joined, newlines, splices, refuse))
    line_ends = _line_ends(tokens)
    includes = set()
    for i, tok in enumerate(tokens):
        # Token pasting (## and %:%:) is allowed: it can assemble _Pragma or __has_include, but a
        # pasted probe runs in a compile process that can open nothing but CUDA's headers (layer 2).
        if tok.kind == "number" and any(word in tok.text for word in (*FORBIDDEN_IDENTIFIERS, "_Pragma")):
            # A pp-number swallows what follows "e+", "p-" or a digit separator (1e+__has_include is one
            # token, and NVRTC agrees); a lexer that stopped earlier would see the name, so refuse it.
            refuse(tok.line, f"{tok.text!r}: a number that runs into a file-reading operator is not allowed in job "
                             "sources")
        if tok.kind == "identifier":
            if tok.text in FORBIDDEN_IDENTIFIERS:
                refuse(tok.line, f"{tok.text} is not allowed in job sources (it can read or probe a file)")
            if tok.text == "_Pragma":
                _check_pragma_operator(tokens, i, refuse)
        if tok.kind == "hash" and tok.starts_line:
            include = _check_directive(tokens, i, line_ends[i], joined, refuse)
            if include is not None:
                includes.add(include)
    return includes


def _splice(text: str, splice: re.Pattern) -> tuple[str, list[int], list[int]]:
    """Join backslash-newline splices; return the text and what maps its offsets to source lines."""
    pieces, removed_at, last, length = [], [], 0, 0
    for m in splice.finditer(text):
        pieces.append(text[last : m.start()])
        length += m.start() - last
        removed_at.append(length)
        last = m.end()
    pieces.append(text[last:])
    joined = "".join(pieces)
    newlines = [m.start() for m in re.finditer("\n", joined)]
    return joined, newlines, removed_at


def _tokens(text: str, newlines: list[int], splices: list[int], refuse):
    def line_of(offset: int) -> int:
        return bisect.bisect_left(newlines, offset) + bisect.bisect_right(splices, offset) + 1

    at_line_start = True
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        if kind == "newline":
            at_line_start = True
            yield _Token("newline", "\n", line_of(m.start()), False, m.start())
            continue
        if kind in ("space", "line_comment", "block_comment"):
            # A comment is one space to the preprocessor, so one that spans lines does not end the
            # line; a '#' after it is still treated as a directive here, in case a compiler differs.
            if kind == "block_comment" and "\n" in m.group():
                at_line_start = True
            continue
        if kind == "open_comment":
            refuse(line_of(m.start()), "unterminated /* comment")
            return  # the rest of the file is inside it
        if kind == "punct" and m.group() == "\\":
            # Outside a literal a backslash only starts a universal character name, which spells an
            # identifier in another alphabet (_Pr\u0061gma); NVRTC refuses basic letters so spelled
            # today, but nothing legitimate needs it.
            refuse(line_of(m.start()), "a backslash outside a string that does not end its line (one with spaces "
                                       "after it, or a universal character name such as \\u0069) is not allowed in "
                                       "job sources")
            continue
        if kind == "raw_string":
            # Where it ends depends on a delimiter that splices and trigraphs do not touch inside it:
            # what follows is not read, rather than read wrongly.
            refuse(line_of(m.start()), "raw string literals (R\"...\") are not allowed in job sources")
            return
        yield _Token(kind, m.group(), line_of(m.start()), at_line_start, m.start())
        at_line_start = False


# The most tokens an #include or #line operand may have: a path of 40 components is about 80.
MAX_OPERAND_TOKENS = 256


def _line_ends(tokens: list[_Token]) -> list[int]:
    """For each token, the index of the newline token that ends its line (or len(tokens)), in one
    backward pass. A block comment that spans lines ends no line, so a file of `/*\n*/#define`
    is one line of 10,000 directives as this reader sees it: each finding the end of its line on
    its own made the guard quadratic (199 KB took 67 s; issue 37)."""
    ends, end = [0] * len(tokens), len(tokens)
    for i in range(len(tokens) - 1, -1, -1):
        if tokens[i].kind == "newline":
            end = i
        ends[i] = end
    return ends


def _check_directive(tokens: list[_Token], i: int, end: int, text: str, refuse) -> Include | None:
    """The directive at tokens[i] ('#'), whose line ends at tokens[end]. Only its name, a pragma's
    first word and an #include's or #line's operand are read, so the work is bounded per directive
    however long its line (a #define's body can be long and is not read here)."""
    hash_tok = tokens[i]
    if i + 1 >= end:
        return None  # the null directive: a '#' alone on its line does nothing
    name = tokens[i + 1]
    if name.kind == "identifier" and name.text in ("include", "line") and end - (i + 2) > MAX_OPERAND_TOKENS:
        refuse(hash_tok.line, f"#{name.text} with more than {MAX_OPERAND_TOKENS} tokens after it is not allowed in "
                              "job sources")
        return None
    rest = tokens[i + 1:end] if name.kind == "identifier" and name.text in ("include", "line") else \
        tokens[i + 1:min(end, i + 3)]
    if name.kind != "identifier" or name.text not in ALLOWED_DIRECTIVES:
        allowed = ", ".join(f"#{d}" for d in sorted(ALLOWED_DIRECTIVES))
        refuse(hash_tok.line, f"directive #{name.text} is not allowed in job sources (allowed: {allowed})")
    elif name.text == "line" and not _plain_line_marker(rest[1:]):
        refuse(hash_tok.line, "#line may give a line number and at most a plain file name (letters, digits, _ . -; "
                              "no path), as in #line 1 \"common.cuh\"")
    elif name.text == "pragma" and (what := rest[1].text if len(rest) > 1 else "") not in ALLOWED_PRAGMAS:
        refuse(hash_tok.line, f"#pragma {what} is not allowed in job sources "
                              f"(allowed: {', '.join(sorted(ALLOWED_PRAGMAS))})")
    elif name.text == "include":
        return _include(hash_tok.line, rest[1:], text, refuse)
    return None


def _include(line: int, operand: list[_Token], text: str, refuse) -> Include | None:
    """#include "name" or #include <name>, the name spelled out: never a macro (what it expands
    to is not seen here), never an absolute path or a backslash; a space only inside a name."""
    spelled = None
    if len(operand) == 1 and operand[0].kind == "string" and operand[0].text.startswith('"'):
        spelled, angled = operand[0].text[1:-1], False
    elif len(operand) >= 2 and operand[0].text == "<" and operand[-1].text == ">":
        spelled, angled = text[operand[0].start + 1: operand[-1].start], True
    if spelled is None or not INCLUDE_NAME.fullmatch(spelled) or "//" in spelled:
        refuse(line, "an #include must spell its file as \"path\" or <path> (letters, digits, _ . + - /, a "
                     "space between two of them; not absolute, no macro)")
        return None
    if angled and ".." in spelled.split("/"):
        refuse(line, f"#include <{spelled}>: '..' is not allowed in a <...> include")
        return None
    return Include(line, spelled, angled)


# A name a job's own source may give its parts (the registry marks its preludes so), never a path.
PLAIN_FILE_NAME = re.compile(r'"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}"')


def _plain_line_marker(args: list[_Token]) -> bool:
    """#line N, or #line N "name": the name only relabels diagnostics, it opens nothing."""
    if not args or args[0].kind != "number" or len(args) > 2:
        return False
    return len(args) == 1 or (args[1].kind == "string" and PLAIN_FILE_NAME.fullmatch(args[1].text) is not None)


def _check_pragma_operator(tokens: list[_Token], i: int, refuse) -> None:
    """_Pragma("unroll") is fine; a _Pragma whose argument is built by a macro cannot be checked."""
    tok = tokens[i]
    rest = [t for t in tokens[i + 1 : i + 4]]
    shape_ok = (len(rest) == 3 and rest[0].text == "(" and rest[1].kind == "string" and rest[2].text == ")")
    if not shape_ok:
        refuse(tok.line, "_Pragma must be written as _Pragma(\"...\") with a literal string")
        return
    body = rest[1].text[rest[1].text.index('"') + 1 : -1]
    words = body.replace("\\", " ").split()
    if not words or words[0] not in ALLOWED_PRAGMAS:
        refuse(tok.line, f"_Pragma(\"{body}\") is not allowed in job sources "
                         f"(allowed pragmas: {', '.join(sorted(ALLOWED_PRAGMAS))})")

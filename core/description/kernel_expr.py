"""Integer expressions in a kernel description: a block, grid, shared-memory size or -D value
written in terms of the problem (M, N, K), the GPU (SM_COUNT, ...) and the kernel's own named
constants (its tunables and defines), e.g. "cdiv(N, BN)" or "SM_COUNT * MIN_BLOCKS".

A description comes from whoever holds a write token, so this is no `eval`: the text is parsed
with Python's own parser and only a handful of node kinds are walked (integer literals, names,
+ - * // %, comparisons, and/or/not, `a if c else b`, and the functions below). Every value is
an integer; one outside 64 bits, a division by zero or a name that is not offered is an
`ExprError` naming the expression.
"""

import ast
from collections.abc import Callable, Mapping

MAX_LENGTH = 300
LIMIT = 2**63


class ExprError(ValueError):
    pass


def split_tail_grid(tiles: int, wave: int, max_pieces: int = 16) -> int:
    """Blocks of a grid that runs whole waves of tiles one block each and cuts each of the last
    partial wave's `tail` tiles into p pieces along K (kernels/tail_split_k.cu): the p in
    1..max_pieces that makes ceil(tail * p / wave) rounds of 1/p of a tile shortest, with a small
    charge per piece. The kernel's own tail_pieces makes the same choice with the same integer
    arithmetic (720720 = lcm(1..16)), so grid and kernel agree."""
    if wave <= 0:
        raise ExprError("split_tail_grid: the wave must be positive")
    tail = tiles % wave
    best, best_cost = 1, None
    for p in range(1, max_pieces + 1):
        cost = -(-tail * p // wave) * (720720 // p) + 2880 * p
        if best_cost is None or cost < best_cost:
            best, best_cost = p, cost
    return tiles - tail + tail * best


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("cdiv by zero")
    return -(-a // b)


def balanced_grid(tiles: int, slots: int) -> int:
    """Blocks of a persistent kernel that walks `tiles` on at most `slots` blocks (one an SM): the
    fewest that keep the fewest waves, so that every block walks the same count of tiles (512 tiles
    on 132 SMs: 128 blocks of 4, not 132 of which 16 walk 3). At a card's power cap the SMs left idle
    leave their power to the others; the kernel lasts as many tiles either way."""
    if slots <= 0:
        raise ExprError("balanced_grid: the slots must be positive")
    return _cdiv(tiles, _cdiv(tiles, slots)) if tiles > 0 else 0


FUNCTIONS: dict[str, Callable[..., int]] = {
    "cdiv": _cdiv,  # ceil(a / b): tiles needed to cover a
    "min": min,
    "max": max,
    "split_tail_grid": split_tail_grid,
    "balanced_grid": balanced_grid,
}

_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}
_COMPARE = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


def parse(text: object) -> ast.expr:
    """The expression's tree; an ExprError for anything outside the small language. `text` may be
    any JSON value from a description: all but a non-empty string is refused here."""
    if not isinstance(text, str) or not text.strip():
        raise ExprError("an expression must be a non-empty string")
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"{text!r} is not an expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExprError("expression nested too deeply") from None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Constant, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp,
                                 ast.IfExp, ast.Call, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or,
                                 *_BINARY, *_COMPARE)):
            raise ExprError(f"{text!r}: {type(node).__name__} is not allowed (integers, names, + - * // %, "
                            f"comparisons, and/or/not, 'a if c else b', {', '.join(FUNCTIONS)})")
        if isinstance(node, ast.Constant) and (type(node.value) is not int):
            raise ExprError(f"{text!r}: only integer literals are allowed, not {node.value!r}")
        if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS
                                           or node.keywords):
            raise ExprError(f"{text!r}: the functions are {', '.join(FUNCTIONS)} (positional arguments)")
    return tree


def names(text: object) -> set[str]:
    """The names an expression reads (not its functions); an ExprError where `text` is not an
    expression (parse)."""
    tree = parse(text)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def evaluate(text: str | int, scope: Mapping[str, int]) -> int:
    """The expression's value with the names in `scope`; an int is its own value."""
    if type(text) is int:
        return text
    tree = parse(text)

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant):
            assert type(node.value) is int  # parse admits no other literal
            out = node.value
        elif isinstance(node, ast.Name):
            if node.id not in scope:
                raise ExprError(f"{text!r}: unknown name {node.id!r}; known here: {', '.join(sorted(scope))}")
            out = scope[node.id]
        elif isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right == 0:
                raise ExprError(f"{text!r}: division by zero")
            out = _BINARY[type(node.op)](left, right)
        elif isinstance(node, ast.UnaryOp):
            operand = value(node.operand)
            out = int(not operand) if isinstance(node.op, ast.Not) else (-operand if isinstance(node.op, ast.USub) else operand)
        elif isinstance(node, ast.Compare):
            out, left = 1, value(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = value(right_node)
                if not _COMPARE[type(op)](left, right):
                    out = 0
                    break
                left = right
        elif isinstance(node, ast.BoolOp):
            is_and = isinstance(node.op, ast.And)
            out = int(is_and)
            for v in node.values:
                if bool(value(v)) != is_and:
                    out = int(not is_and)
                    break
        elif isinstance(node, ast.IfExp):
            out = value(node.body) if value(node.test) else value(node.orelse)
        else:
            assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # parse admits no other node
            out = FUNCTIONS[node.func.id](*(value(a) for a in node.args))
        out = int(out)
        if not -LIMIT < out < LIMIT:
            raise ExprError(f"{text!r}: a value beyond 64 bits")
        return out

    try:
        return value(tree)
    except TypeError as exc:  # a function given the wrong number of arguments
        raise ExprError(f"{text!r}: {exc}") from None


def check(text: str | int, known: set[str]) -> None:
    """Raise an ExprError where the expression reads a name outside `known` (at the door, before
    any value is known)."""
    if type(text) is int:
        return
    unknown = names(text) - known
    if unknown:
        raise ExprError(f"{text!r}: unknown name(s) {', '.join(sorted(unknown))}; known here: {', '.join(sorted(known))}")


"""A description's `wrapper`, read as the call a user makes at home.

It is either the name of the repository's function that takes A and B and returns C (`"matmul"`,
called as `matmul(a, b)`), or that call written out as Python, where the wrapper wants more than the
two matrices: `"group_m_matmul(a, b, block_size_m=256, dtype_out=torch.float16, dtype_acc=tl.float32)"`,
`"matmul(mode='group_m')(a, b)"` (a class whose instance is the wrapper). `a` and `b` stand for the
matrices; every other value is a literal or a name of the wrapper's file (`torch.float16`, `tl.float32`).

The text is parsed here, never evaluated, into a plan of plain JSON that the confined compile process
follows against the file's own names (worker/compile/triton_wrapper.py `called`): so a description with
a call gemmwatch cannot follow is refused when the job is posted, with what is wrong in it.
"""

import ast

MAX_LENGTH = 1000
MAX_CALLS = 3  # matmul(mode="group_m")(a, b) is two


def plan(text: str) -> dict:
    """{"shown", "callee", "calls"}: the callee a dotted name of the file, then each call's positional and
    keyword values in turn, the last one given A and B. A ValueError says what of `text` cannot be followed."""
    if len(text) > MAX_LENGTH:
        raise ValueError(f"the wrapper's call is {len(text)} characters; at most {MAX_LENGTH}")
    if text.isidentifier():
        return {"shown": f"{text}(a, b)", "callee": [text],
                "calls": [{"args": [{"matrix": "a"}, {"matrix": "b"}], "kwargs": {}}]}
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"{text!r} is neither a function's name nor a Python call such as "
                         "`matmul(a, b, block_size_m=128)`") from None
    calls: list[ast.Call] = []
    while isinstance(tree, ast.Call):
        calls.insert(0, tree)
        tree = tree.func
    if not calls:
        raise ValueError(f"{text!r} is neither a function's name nor a call of one with a and b, such as "
                         "`matmul(a, b, block_size_m=128)`")
    if len(calls) > MAX_CALLS:
        raise ValueError(f"{text!r} chains {len(calls)} calls; gemmwatch follows at most {MAX_CALLS}")
    read = [_call(call) for call in calls]
    matrices = [[v["matrix"] for v in _values(one) if "matrix" in v] for one in read]
    if any(matrices[:-1]) or sorted(matrices[-1]) != ["a", "b"]:
        raise ValueError(f"{text!r}: a and b (the matrices) each once, in the last call's arguments, as in "
                         "`matmul(mode='group_m')(a, b)`")
    return {"shown": ast.unparse(calls[-1]), "callee": _dotted(tree), "calls": read}


def _values(call: dict) -> list[dict]:
    return [*call["args"], *call["kwargs"].values()]


def _call(call: ast.Call) -> dict:
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(k.arg is None for k in call.keywords):
        raise ValueError(f"{ast.unparse(call)}: gemmwatch follows arguments written out, not *args or **kwargs")
    return {"args": [_value(arg) for arg in call.args], "kwargs": {k.arg: _value(k.value) for k in call.keywords}}


def _value(node: ast.expr) -> dict:
    if isinstance(node, ast.Name) and node.id in ("a", "b"):
        return {"matrix": node.id}
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return {"literal": node.value}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        number = node.operand.value
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return {"literal": -number}
    if isinstance(node, (ast.Tuple, ast.List)):
        return {"tuple" if isinstance(node, ast.Tuple) else "list": [_value(item) for item in node.elts]}
    if isinstance(node, (ast.Name, ast.Attribute)):
        return {"name": _dotted(node)}
    raise ValueError(f"{ast.unparse(node)}: a wrapper's argument is a literal (128, 'group_m', True, None), a name "
                     "of its file (torch.float16, tl.float32), or a or b")


def _dotted(node: ast.expr) -> list[str]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise ValueError(f"{ast.unparse(node)}: gemmwatch follows a dotted name of the wrapper's file here")
    parts.insert(0, node.id)
    if parts[0] in ("a", "b"):
        raise ValueError(f"{'.'.join(parts)}: a and b are passed as they are (a wrapper that wants B transposed "
                         "is given B's layout in `layout`)")
    if any(part.startswith("__") for part in parts):
        raise ValueError(f"{'.'.join(parts)}: a name with a double underscore is not followed")
    return parts

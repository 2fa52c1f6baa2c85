"""Realistic one-site bugs, found in a module's AST and written back into its text as a minimal edit.

Each operator finds its sites with the AST and changes only the bytes of the site (an operator token, a constant, a
name, the lines of one branch), so the gold patch that undoes a bug is a one- or few-line diff like a human fix,
not a reformatted file. Only code inside functions is mutated (not module constants, class bodies, ``assert``
statements, ``if TYPE_CHECKING`` / ``if __name__ == "__main__"`` blocks).

Operators (``OPERATORS``):

* ``comparison``: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``is`` <-> ``is not``, ``in`` <-> ``not in``
* ``arithmetic``: ``+`` <-> ``-`` (also ``+=`` <-> ``-=``), not when an operand is a string literal
* ``off_by_one``: an integer index or slice bound one further from zero (``x[1:]`` -> ``x[2:]``, ``x[-1]`` ->
  ``x[-2]``), a ``range`` stop one short (``range(n)`` -> ``range(n - 1)``)
* ``default_arg``: a keyword default flipped (``True`` <-> ``False``) or one higher (``0`` -> ``1``)
* ``removed_branch``: an ``if`` (or ``elif``) without an ``else`` dropped with its body
* ``exception_type``: ``raise ValueError(...)`` -> ``raise TypeError(...)`` and the like
* ``bool_op``: ``and`` <-> ``or``
* ``negation``: a ``not`` dropped
* ``return_value``: ``return x`` -> ``return y`` for another variable of the function (the closest assigned one)

:func:`find_mutations` lists every site of a module in source order (pure, deterministic); :func:`apply_mutation`
returns the mutated text, which always parses and always differs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

OPERATORS = ("comparison", "arithmetic", "off_by_one", "default_arg", "removed_branch", "exception_type", "bool_op",
             "negation", "return_value")

_COMPARE_SWAP = {
    ast.Lt: (r"<", "<="), ast.LtE: (r"<=", "<"), ast.Gt: (r">", ">="), ast.GtE: (r">=", ">"),
    ast.Eq: (r"==", "!="), ast.NotEq: (r"!=", "=="), ast.Is: (r"is(?!\s+not\b)", "is not"),
    ast.IsNot: (r"is\s+not", "is"), ast.In: (r"in", "not in"), ast.NotIn: (r"not\s+in", "in"),
}
_ARITH_SWAP = {ast.Add: (r"\+", "-"), ast.Sub: (r"-", "+")}
_AUG_SWAP = {ast.Add: (r"\+=", "-="), ast.Sub: (r"-=", "+=")}
_BOOL_SWAP = {ast.And: (r"and", "or"), ast.Or: (r"or", "and")}
EXCEPTION_SWAP = {
    "ValueError": "TypeError", "TypeError": "ValueError", "KeyError": "ValueError", "IndexError": "ValueError",
    "AttributeError": "TypeError", "RuntimeError": "ValueError", "LookupError": "ValueError",
}
_SKIP_NAMES = {"self", "cls", "_"}


@dataclass(frozen=True)
class Mutation:
    operator: str
    line: int  # 1-based line of the site
    col: int  # byte column of the site
    function: str  # qualified name of the enclosing function, e.g. "LRUCache.popitem"
    description: str  # what changed, e.g. "`<` -> `<=`" (kept in the instance's metadata; never shown to agents)
    start: int  # byte offsets in the UTF-8 source of the replaced span
    end: int
    replacement: str

    @property
    def key(self) -> tuple:
        return (self.line, self.col, self.operator, self.start, self.end)


class _Source:
    def __init__(self, text: str):
        self.text = text
        self.data = text.encode("utf-8")
        self.line_starts = [0]
        for i, b in enumerate(self.data):
            if b == 0x0A:
                self.line_starts.append(i + 1)

    def offset(self, lineno: int, col: int) -> int:
        if lineno - 1 >= len(self.line_starts):
            return len(self.data)
        return self.line_starts[lineno - 1] + col

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, a: int, b: int) -> str:
        return self.data[a:b].decode("utf-8")

    def line_indent(self, lineno: int) -> str:
        line = self.segment(self.offset(lineno, 0), self.offset(lineno + 1, 0))
        return line[: len(line) - len(line.lstrip(" \t"))]


def _find_token(segment: str, pattern: str) -> tuple[int, int] | None:
    """The first match of `pattern` in `segment` outside comments, where everything else is layout (whitespace,
    parentheses, line continuations): the text between two operands. Offsets in characters."""
    i = 0
    regex = re.compile(pattern)
    while i < len(segment):
        c = segment[i]
        if c in " \t\r\n\\()":
            i += 1
        elif c == "#":
            nl = segment.find("\n", i)
            i = len(segment) if nl < 0 else nl
        else:
            m = regex.match(segment, i)
            if not m or (m.group(0)[-1].isalpha() and m.end() < len(segment) and (segment[m.end()].isalnum() or segment[m.end()] == "_")):
                return None
            return m.start(), m.end()
    return None


def _is_str_literal(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))) or isinstance(node, ast.JoinedStr)


def _int_value(node: ast.AST) -> int | None:
    """The value of an int literal, or of ``-literal``."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _is_guard(test: ast.AST) -> bool:
    """`if TYPE_CHECKING` / `if typing.TYPE_CHECKING` / `if __name__ == "__main__"`: not the library's behaviour."""
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(test) if isinstance(n, ast.Attribute)}
    return bool(names & {"TYPE_CHECKING", "__name__"})


def _parenthesize(text: str, node: ast.AST) -> str:
    simple = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript)
    return text if isinstance(node, simple) else f"({text})"


class _Finder(ast.NodeVisitor):
    def __init__(self, src: _Source):
        self.src = src
        self.found: list[Mutation] = []
        self.scope: list[str] = []  # qualified name parts
        self.func_depth = 0
        self.func_stack: list[ast.AST] = []
        self.bodies: dict[int, list] = {}  # id(statement) -> the statement list holding it

    def index_bodies(self, tree: ast.AST) -> None:
        for parent in ast.walk(tree):
            for name in ("body", "orelse", "finalbody"):
                body = getattr(parent, name, None)
                if isinstance(body, list):
                    for stmt in body:
                        self.bodies[id(stmt)] = body

    # -- helpers

    def add(self, operator: str, node: ast.AST, start: int, end: int, replacement: str, description: str) -> None:
        if not self.func_depth:
            return
        self.found.append(Mutation(operator, node.lineno, node.col_offset, ".".join(self.scope), description, start,
                                   end, replacement))

    def token_between(self, left: ast.AST, right: ast.AST, pattern: str) -> tuple[int, int] | None:
        a, b = self.src.end(left), self.src.start(right)
        seg = self.src.segment(a, b)
        hit = _find_token(seg, pattern)
        if hit is None:
            return None
        return a + len(seg[: hit[0]].encode()), a + len(seg[: hit[1]].encode())

    # -- scopes

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.scope.append(node.name)
        self.func_depth += 1
        self.func_stack.append(node)
        self._defaults(node)
        for stmt in node.body:
            self.visit(stmt)
        self.func_stack.pop()
        self.func_depth -= 1
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assert(self, node: ast.Assert) -> None:  # internal checks are not behaviour
        return

    def visit_If(self, node: ast.If) -> None:
        if _is_guard(node.test):
            return
        if not node.orelse:
            self._removed_branch(node)
        self.generic_visit(node)

    # -- operators

    def _defaults(self, node) -> None:
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            if isinstance(default, ast.Constant) and isinstance(default.value, bool):
                new = "False" if default.value else "True"
            elif isinstance(default, ast.Constant) and type(default.value) is int and default.value >= 0:
                new = str(default.value + 1)
            else:
                continue
            old = self.src.segment(self.src.start(default), self.src.end(default))
            self.add("default_arg", default, self.src.start(default), self.src.end(default), new,
                     f"default of `{arg.arg}`: `{old}` -> `{new}`")

    def _removed_branch(self, node: ast.If) -> None:
        if not self.func_stack:
            return
        first_line = self.src.segment(self.src.offset(node.lineno, 0), self.src.offset(node.lineno + 1, 0)).lstrip()
        is_elif = first_line.startswith("elif")
        start = self.src.offset(node.lineno, 0)
        end = self.src.offset(node.end_lineno + 1, 0)
        parent_body = self._parent_body(node)
        replacement = ""
        if not is_elif and parent_body is not None and len(parent_body) == 1:
            replacement = f"{self.src.line_indent(node.lineno)}pass\n"
        kind = "elif" if is_elif else "if"
        self.add("removed_branch", node, start, end, replacement, f"`{kind}` branch at line {node.lineno} removed")

    def _parent_body(self, target: ast.AST) -> list | None:
        return self.bodies.get(id(target))

    def visit_Compare(self, node: ast.Compare) -> None:
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            swap = _COMPARE_SWAP.get(type(op))
            span = self.token_between(left, right, swap[0]) if swap else None
            if span:
                old = self.src.segment(*span)
                self.add("comparison", node, *span, swap[1], f"`{old}` -> `{swap[1]}`")
            left = right
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        swap = _ARITH_SWAP.get(type(node.op))
        if swap and not (_is_str_literal(node.left) or _is_str_literal(node.right)):
            span = self.token_between(node.left, node.right, swap[0])
            if span:
                self.add("arithmetic", node, *span, swap[1], f"`{self.src.segment(*span)}` -> `{swap[1]}`")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        swap = _AUG_SWAP.get(type(node.op))
        if swap and not _is_str_literal(node.value):
            span = self.token_between(node.target, node.value, swap[0])
            if span:
                self.add("arithmetic", node, *span, swap[1], f"`{self.src.segment(*span)}` -> `{swap[1]}`")
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        swap = _BOOL_SWAP[type(node.op)]
        for left, right in zip(node.values, node.values[1:]):
            span = self.token_between(left, right, swap[0])
            if span:
                self.add("bool_op", node, *span, swap[1], f"`{self.src.segment(*span)}` -> `{swap[1]}`")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            start, operand = self.src.start(node), self.src.start(node.operand)
            between = self.src.segment(start, operand)
            if re.fullmatch(r"not\s*", between):
                self.add("negation", node, start, operand, "", "`not` removed")
        self.generic_visit(node)

    def _bump_int(self, node: ast.AST, why: str) -> None:
        value = _int_value(node)
        if value is None:
            return
        new = value + 1 if value >= 0 else value - 1  # one further from zero
        self.add("off_by_one", node, self.src.start(node), self.src.end(node), str(new), f"{why}: `{value}` -> `{new}`")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        sl = node.slice
        if isinstance(sl, ast.Slice):
            for part, name in ((sl.lower, "slice start"), (sl.upper, "slice stop")):
                if part is not None:
                    self._bump_int(part, name)
        elif _int_value(sl) is not None:
            self._bump_int(sl, "index")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "range" and node.args and not node.keywords \
                and len(node.args) <= 3 and not any(isinstance(a, ast.Starred) for a in node.args):
            stop = node.args[0] if len(node.args) == 1 else node.args[1]
            value = _int_value(stop)
            old = self.src.segment(self.src.start(stop), self.src.end(stop))
            if value is not None:
                if value > 0:
                    self.add("off_by_one", stop, self.src.start(stop), self.src.end(stop), str(value - 1),
                             f"range stop: `{value}` -> `{value - 1}`")
            else:
                new = f"{_parenthesize(old, stop)} - 1"
                self.add("off_by_one", stop, self.src.start(stop), self.src.end(stop), new,
                         f"range stop: `{old}` -> `{new}`")
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        name = exc.func if isinstance(exc, ast.Call) else exc
        if isinstance(name, ast.Name) and name.id in EXCEPTION_SWAP:
            new = EXCEPTION_SWAP[name.id]
            self.add("exception_type", node, self.src.start(name), self.src.end(name), new,
                     f"raises `{new}` instead of `{name.id}`")
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if isinstance(node.value, ast.Name) and self.func_stack and node.value.id not in _SKIP_NAMES:
            other = self._other_variable(self.func_stack[-1], node)
            if other:
                v = node.value
                self.add("return_value", node, self.src.start(v), self.src.end(v), other,
                         f"returns `{other}` instead of `{v.id}`")
        self.generic_visit(node)

    def _other_variable(self, func, ret: ast.Return) -> str | None:
        """The variable assigned last before `ret` in `func` (else the last parameter), other than the one returned."""
        returned = ret.value.id
        assigned: list[tuple[int, int, str]] = []
        for n in ast.walk(func):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and (n.lineno, n.col_offset) < (ret.lineno, ret.col_offset):
                assigned.append((n.lineno, n.col_offset, n.id))
        candidates = [name for *_, name in sorted(assigned) if name != returned and name not in _SKIP_NAMES]
        if candidates:
            return candidates[-1]
        args = func.args
        params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        params = [p for p in params if p != returned and p not in _SKIP_NAMES]
        return params[-1] if params else None


def find_mutations(source: str) -> list[Mutation]:
    """Every mutation site of a module, in source order (then by operator). Deterministic."""
    tree = ast.parse(source)
    finder = _Finder(_Source(source))
    finder.index_bodies(tree)
    finder.visit(tree)
    unique = {m.key: m for m in finder.found}
    return [unique[k] for k in sorted(unique)]


def apply_mutation(source: str, mutation: Mutation) -> str:
    """`source` with the mutation's span replaced. Raises ValueError when the result does not parse or is unchanged."""
    data = source.encode("utf-8")
    new = (data[: mutation.start] + mutation.replacement.encode("utf-8") + data[mutation.end:]).decode("utf-8")
    if new == source:
        raise ValueError(f"mutation {mutation.description} changes nothing")
    try:
        ast.parse(new)
    except SyntaxError as e:
        raise ValueError(f"mutation {mutation.description} does not parse: {e}") from None
    return new


__all__ = ["EXCEPTION_SWAP", "OPERATORS", "Mutation", "apply_mutation", "find_mutations"]

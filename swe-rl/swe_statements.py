"""Problem statements in a user's words, written from the failing behaviour, never from the diff.

Input: one failing test as pytest saw it on the buggy code: the test function's source, the statement it failed at,
pytest's message and traceback (run with ``--showlocals``, so the test's variables come with their values), the
test's arguments, and the project's name and version. Output: an issue as a user would file it: a title naming the
function they called, a reproduction snippet (the failing check's subject, with the earlier statements of the test
it depends on and the values of the variables it reads), what happened (the value returned, or the exception) and
what they expected. The mutated file, line and operator are no input, so nothing of the fix can leak into the text.

The checks understood: ``assert`` (``==``, ``is``, ``!=``, ``is not``, truthiness), unittest's and helpers'
equality calls (``self.assertEqual(a, b)``, ``assert_equal(a, b)``, ``chk(a, b)``), ``assertTrue``/``assertFalse``/
``assertIsNone``, ``with pytest.raises(E)`` that did not raise, ``raises(E, lambda: ...)``, and any statement that
raised. Which side is the user's call and which the expectation: the side calling into the project (or a variable
assigned from such a call) is the user's.

Several phrasings exist for every part; a seeded ``random.Random`` picks them, so the same seed gives the same text.
Memory addresses and sandbox paths are scrubbed so the text is the same on every run.
"""

from __future__ import annotations

import ast
import builtins
import io
import random
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field

MAX_VALUE_CHARS = 300  # a value quoted inline
MAX_TEXT_CHARS = 3000  # a multi-line string shown as a text block
MAX_GIVEN_CHARS = 200  # a variable's value written into the snippet (`x = [1, 2]`); longer ones are left out
MAX_SNIPPET_LINES = 14
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TESTBED = re.compile(r"/testbed/")
_TMP = re.compile(r"/tmp/pytest-of-[^/\s]+/pytest-\d+/")
_FUNC_REPR = re.compile(r"<(?:function|bound method|built-in function|built-in method) ([\w.]+)[^>]*>")
_BUILTINS = frozenset(dir(builtins))
# helper calls that compare their first two arguments for equality (unittest, and the projects' own helpers)
EQUALITY_HELPERS = frozenset({"assertEqual", "assertEquals", "assertDictEqual", "assertListEqual", "assertTupleEqual",
                              "assertSequenceEqual", "assertSetEqual", "assertMultiLineEqual", "assert_equal",
                              "assert_eq", "eq_", "chk"})
RAISES_HELPERS = frozenset({"raises", "assertRaises"})


@dataclass(frozen=True)
class Failure:
    """One failing test, as the generator saw it."""

    test_source: str  # the whole file that defines the test function (pristine)
    function: str  # the test function's name (no parameters)
    def_line: int  # a line of its ``def`` (or decorators), 1-based
    message: str  # the JUnit message: "AssertionError: assert 1 == 2\n +  where 1 = f(0)", "KeyError: 'x'"
    text: str = ""  # the JUnit failure text: pytest's traceback (with --showlocals)
    test_file: str = ""  # the path of that file in the traceback
    failed_line: int | None = None  # where the test function failed (1-based); read from `text` when None
    package: str = ""  # the project's top-level package: calls into it are what the user calls
    self_attrs: Mapping[str, str] = field(default_factory=dict)  # unittest classes: `Cache = RRCache` -> {"Cache": "RRCache"}
    params: Mapping[str, str] = field(default_factory=dict)  # extra variable values (name -> repr)


@dataclass
class Symptom:
    kind: str  # "value" (a wrong value), "raises" (an exception), "no_raise" (no exception), "other"
    snippet: str
    callee: str | None
    actual: str | None = None  # a repr
    expected: str | None = None  # code: a repr or an expression
    error: str | None = None  # "KeyError: 'x'"
    expectation: str | None = None  # prose, when there is no single expected value ("a true value")
    unresolved: int = 0  # names the snippet reads that it does not define

    def expected_text(self) -> str | None:
        return f"`{shorten(self.expected)}`" if self.expected is not None else self.expectation


# ------------------------------------------------------------------------------------------------ pytest's text


def scrub(text: str) -> str:
    text = _ADDRESS.sub("", text)
    text = _TESTBED.sub("", text)
    return _TMP.sub("/tmp/", text)


def shorten(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 4].rstrip() + " ..."


def _is_expression(text: str) -> bool:
    if re.search(r"<[^<>]*>", text):  # an object's default repr
        return False
    try:
        ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def _complete(text: str) -> bool:
    """Whether `text` has no open string or bracket (it may still not be an expression)."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.ERRORTOKEN and tok.string.strip():
                return False
    except (tokenize.TokenError, SyntaxError):
        return False
    return True


def parse_params(first_line: str) -> dict[str, str]:
    """pytest's ``a = 1, b = 'x, y'`` line (a test's arguments) -> {name: repr}; reprs that are not Python
    expressions (``<object ...>``, fixtures) are left out."""
    if not re.match(r"^\w+ = ", first_line):
        return {}
    parts: list[str] = []
    for piece in re.split(r", (?=\w+ = )", first_line.strip()):
        if parts and not _complete(parts[-1].partition(" = ")[2]):
            parts[-1] += ", " + piece  # the split fell inside a string or brackets
        else:
            parts.append(piece)
    out = {}
    for part in parts:
        name, _, value = part.partition(" = ")
        if name.isidentifier() and _is_expression(value):
            out[name] = value
    return out


def _test_entry(text: str, test_file: str) -> str:
    """The traceback entry of the test function itself: the text up to its ``file:line:`` line."""
    m = re.search(rf"^{re.escape(test_file)}:\d+:", text, re.MULTILINE) if test_file else None
    return text[: m.start()] if m else ""


def parse_locals(text: str, test_file: str) -> dict[str, str]:
    """The test function's variables as ``--showlocals`` printed them (``name   = repr`` lines after the failing
    source line); values that are not Python expressions are left out."""
    entry = _test_entry(text, test_file)
    marker = entry.rfind("\n>")
    if marker < 0:
        return {}
    found: list[list[str]] = []  # [name, first line, continuation lines...]
    for line in entry[marker:].splitlines():
        m = re.match(r"^([A-Za-z_]\w*)\s*= (.*)$", line)
        if m:
            found.append([m.group(1), m.group(2)])
        elif found and line.startswith(" ") and line.strip():
            found[-1].append(line.strip())  # pprint's continuation of a long value
        elif found and not line.strip():
            found.append(["", ""])  # a blank line ends a value
    out = {}
    for name, *lines in found:
        value = "\n".join(lines)
        if name and _is_expression(value):
            out[name] = _one_line(value)
    return out


def _one_line(value: str) -> str:
    """A value pprint spread over lines, as one line (``repr`` of the literal when it is one)."""
    if "\n" not in value:
        return value
    try:
        return repr(ast.literal_eval(value))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return " ".join(part.strip() for part in value.splitlines())


def failed_line_of(text: str, test_file: str) -> int | None:
    """The line of the test file where the failure happened: the first ``file:line:`` entry of the traceback."""
    m = re.search(rf"^{re.escape(test_file)}:(\d+):", text, re.MULTILINE)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------------------------ the test's code


def _innermost_statement(func: ast.AST, line: int) -> ast.stmt | None:
    best = None
    for node in ast.walk(func):
        if isinstance(node, ast.stmt) and node is not func and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.lineno, -(node.end_lineno or 0)) >= (best.lineno, -(best.end_lineno or 0)):
                best = node
    return best


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_FLATTENED = (ast.If, ast.With, ast.AsyncWith, ast.Try)  # their statements are taken one by one


def _defined(stmt: ast.stmt) -> set[str]:
    """Names a statement of the test body binds (assignments, loop targets, local functions and classes, imports;
    for a loop, also everything its body binds)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, _LOOPS):
        out = set() if isinstance(stmt, ast.While) else {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)}
        for inner in ast.walk(stmt):
            if inner is not stmt and isinstance(inner, ast.stmt) and not isinstance(inner, _LOOPS + _FLATTENED):
                out |= _defined(inner)
        return out
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Call, ast.Subscript, ast.Attribute)):
        root = _root(stmt.value)  # `cache.update(...)`, `cache[1]`: a statement that works on an object changes it
        return {root} if root else set()
    targets = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _statements_before(func: ast.AST, before: int) -> list[ast.stmt]:
    """The statements of the test function that end before line `before`, in source order, as a reader would copy
    them: simple statements at any depth (inside ``try``, ``with`` and ``if`` too), but a finished loop, local
    function or class as a whole (a loop body means nothing without its header)."""
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(func):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    units: dict[int, ast.stmt] = {}
    for s in ast.walk(func):
        if not isinstance(s, ast.stmt) or s is func or (s.end_lineno or s.lineno) >= before or isinstance(s, _FLATTENED):
            continue
        unit, node = s, s
        while id(node) in parents and parents[id(node)] is not func:
            node = parents[id(node)]
            if isinstance(node, _LOOPS + _DEFS) and (node.end_lineno or node.lineno) < before:
                unit = node
        if isinstance(unit, ast.Lambda):
            continue
        units[id(unit)] = unit
    return sorted(units.values(), key=lambda s: (s.lineno, s.col_offset))


def _dependencies(func: ast.AST, before: int, names: set[str]) -> list[ast.stmt]:
    """The statements of the test function before line `before` that bind `names` (transitively)."""
    body = _statements_before(func, before)
    wanted, picked = set(names), []
    for s in reversed(body):
        if _defined(s) & wanted:
            picked.append(s)
            wanted |= _names(s)
    return list(reversed(picked))


def _segment(source: str, node: ast.AST) -> str:
    """The node's source (a definition with its decorators), dedented by its own column only (lines inside a
    multi-line string keep theirs)."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        lines = source.splitlines()[min(d.lineno for d in decorators) - 1: node.end_lineno]
        text = "\n".join(lines)
    else:
        text = ast.get_source_segment(source, node, padded=True) or ""
    pad = " " * node.col_offset
    return "\n".join(line[len(pad):] if line.startswith(pad) else line for line in text.splitlines())


def library_names(tree: ast.AST, package: str) -> set[str]:
    """Names the test module binds to the project (``import toolz``, ``from toolz import get``)."""
    out = set()
    if not package:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package:
            out |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == package}
    return out


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _func_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _calls(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


class _Code:
    """The test module, its function and the values pytest printed: answers the questions the analysis asks."""

    def __init__(self, failure: Failure, source: str, func: ast.AST, stmt: ast.stmt, library: set[str]):
        self.failure, self.source, self.func, self.stmt = failure, source, func, stmt
        self.library = library
        self.values = {**parse_params(scrub(failure.text).split("\n", 1)[0]),
                       **parse_locals(scrub(failure.text), failure.test_file), **failure.params}
        # variables the test assigned from a call into the project, and of those the objects made by a class of it:
        # `url = URL(base)` -> derived {"url"}, instances {"url": "URL"}
        self.derived: set[str] = set()
        self.instances: dict[str, str] = {}
        for s in _statements_before(func, stmt.lineno):
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                var, value = s.targets[0].id, s.value
                if self.is_mine(value):
                    self.derived.add(var)
                    f = value.func.value if isinstance(value, ast.Call) and isinstance(value.func, ast.Subscript) \
                        else getattr(value, "func", None)
                    name = self.callee(value) if isinstance(value, ast.Call) else None
                    if name and isinstance(f, (ast.Name, ast.Attribute)) and name.split(".")[-1][:1].isupper():
                        self.instances[var] = name

    def text(self, node: ast.AST) -> str:
        return self.with_self_attrs(_segment(self.source, node))

    def with_self_attrs(self, code: str) -> str:
        """``self.Cache(2)`` -> ``RRCache(2)`` with the test class's ``Cache = RRCache``."""
        attrs = self.failure.self_attrs
        return re.sub(r"\bself\.(\w+)\b", lambda m: attrs.get(m.group(1), m.group(0)), code) if attrs else code

    def is_mine(self, node: ast.AST) -> bool:
        """Does `node` compute something with the project (a call into it, or a variable assigned from one)?"""
        roots = {_root(c.func) for c in _calls(node)} | _names(node)
        attrs = {a.attr for a in ast.walk(node) if isinstance(a, ast.Attribute)
                 and isinstance(a.value, ast.Name) and a.value.id == "self"}
        return bool(roots & (self.library | self.derived)) or bool(attrs & set(self.failure.self_attrs))

    def callee(self, node: ast.AST, source: str | None = None) -> str | None:
        """The function the user called: the first call into the project (``URL.to_text`` for a method of an object
        the test made with ``URL(...)``), else None. `source`: the text `node` was parsed from (the test file)."""
        source = self.source if source is None else source
        for c in _calls(node):
            f = c.func.value if isinstance(c.func, ast.Subscript) else c.func  # RRCache[int, int](...)
            if not isinstance(f, (ast.Name, ast.Attribute)) or _func_name(c) in EQUALITY_HELPERS | RAISES_HELPERS:
                continue
            root = _root(f)
            raw = ast.get_source_segment(source, f) or ""
            text = self.with_self_attrs(raw)
            if root in self.library or (root == "self" and text != raw):
                return text
            if root in self.instances and isinstance(f, ast.Attribute):
                return self.instances[root] + text[len(root):]
        return None

    def sides(self, a: ast.AST, b: ast.AST) -> tuple[ast.AST, ast.AST]:
        """(the user's side, the expected side)."""
        if self.is_mine(b) and not self.is_mine(a):
            return b, a
        if self.is_mine(a) or not _calls(b) or _calls(a):
            return a, b
        return b, a

    def value(self, node: ast.AST) -> str | None:
        """A printed value for `node`: a variable pytest showed, or a literal-ish expression."""
        if isinstance(node, ast.Name) and node.id in self.values:
            return self.values[node.id]
        if isinstance(node, ast.Constant) or not (_names(node) - self.library - _BUILTINS):
            if not _calls(node) or isinstance(node, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
                return self.text(node)
        return None

    def snippet(self, code: str, *, show: bool = False) -> tuple[str, int]:
        """(`code` preceded by the earlier statements it depends on and the values of the variables it reads; the
        number of names it still leaves undefined). `show`: the last line prints the value."""
        try:
            names = _names(ast.parse(code))
        except SyntaxError:
            names = _names(self.stmt)
        deps = _dependencies(self.func, self.stmt.lineno, names)
        defined = set().union(*(_defined(d) for d in deps)) if deps else set()
        used = names.union(*(_names(d) for d in deps)) if deps else set(names)
        given = [f"{n} = {self.values[n]}" for n in sorted(used - defined)
                 if n in self.values and n != "self" and len(self.values[n]) <= MAX_GIVEN_CHARS]
        lines = given + [self.text(d) for d in deps]
        if show and deps and _defined(deps[-1]) == {code} and code.isidentifier():
            lines.append(f"print({code})")  # `result = f(x)` then `print(result)`
        else:
            lines.append(f"print({code})" if show and "\n" not in code else code)
        text = "\n".join(lines)
        out = text.splitlines()
        text = "\n".join(out[-MAX_SNIPPET_LINES:])
        given_names = {line.split(" = ", 1)[0] for line in given}
        unresolved = used - defined - given_names - self.library - _BUILTINS - {"self", "print"}
        return text, len(unresolved)


# pytest prints these as values (a call's result, a name's value, a literal); other expressions (a - b) are
# printed as an explanation with their operands' values, which is not the value of the whole
_VALUE_NODES = (ast.Call, ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set)
_OP_TEXT = {ast.Eq: " == ", ast.Is: " is ", ast.IsNot: " is not ", ast.NotEq: " != "}


def _where_call(message: str, actual: str, node: ast.AST) -> str | None:
    """From pytest's explanation ``+  where 3 = f(1, 2)``: the call `node` with its argument values (only when the
    function pytest names is the one the source calls: a wrapper may carry another name)."""
    name = _func_name(node) if isinstance(node, ast.Call) else ""
    for line in message.splitlines():
        m = re.match(r"^\s*\+\s+where (.*?) = (.*)$", line)
        if m and m.group(1).strip() == actual.strip():
            call = _FUNC_REPR.sub(lambda f: f.group(1), m.group(2)).strip()
            called = re.match(r"^([\w.]+)\(", call)
            if name and called and called.group(1).split(".")[-1] == name and _is_expression(call):
                return call
            return None
    return None


def _assert_values(message: str) -> str | None:
    """The ``assert ...`` line of a rewritten assertion's message (pytest may or may not prefix the type)."""
    first = message.splitlines()[0] if message else ""
    first = first[len("AssertionError: "):] if first.startswith("AssertionError: ") else first
    return first[len("assert "):] if first.startswith("assert ") else None


def _is_object_repr(value: str | None) -> bool:
    return value is not None and bool(re.match(r"^<.*>$", value.strip()))


# ------------------------------------------------------------------------------------------------ analysis


def _comparison(code: _Code, a: ast.AST, b: ast.AST, op: ast.cmpop, printed: tuple[str, str] | None,
                error: str | None) -> Symptom:
    """``a <op> b`` failed (or raised `error` on the way): the user's side, its value and the expected one."""
    mine, other = code.sides(a, b)
    actual = expected = None
    if printed is not None:
        p_mine, p_other = printed if mine is a else printed[::-1]
        if isinstance(mine, _VALUE_NODES):
            actual = p_mine
        if isinstance(other, _VALUE_NODES):
            expected = p_other
    if isinstance(mine, ast.Name) and mine.id in code.values:
        actual = code.values[mine.id]
    if expected is None:
        expected = code.value(other)
    if _is_object_repr(expected):
        expected = None
    prose = None
    if expected is not None and isinstance(op, (ast.IsNot, ast.NotEq)):
        expected, prose = None, f"anything but `{shorten(expected)}`"
    subject = code.text(mine)
    if actual is not None and isinstance(mine, ast.Call):
        subject = _where_call(code.failure.message, actual, mine) or subject
    if error:
        snippet, unresolved = code.snippet(subject)
        return Symptom("raises", snippet, code.callee(mine), expected=expected, expectation=prose, error=error,
                       unresolved=unresolved)
    snippet, unresolved = code.snippet(subject, show=True)
    return Symptom("value", snippet, code.callee(mine), actual=actual, expected=expected, expectation=prose,
                   unresolved=unresolved)


def _check_of(stmt: ast.stmt) -> tuple[str, tuple] | None:
    """The check a statement makes: ("compare", (a, b, op)), ("truth", (x, bool)), ("raises", (exc, body))."""
    for node in ast.walk(stmt):  # toolz's `assert raises(TypeError, lambda: f())`
        if isinstance(node, ast.Call) and _func_name(node) in RAISES_HELPERS and len(node.args) == 2 \
                and isinstance(node.args[1], ast.Lambda):
            return "raises", (node.args[0], node.args[1].body)
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OP_TEXT:
            return "compare", (test.left, test.comparators[0], test.ops[0])
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return "truth", (test.operand, False)
        return "truth", (test, True)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call, name = stmt.value, _func_name(stmt.value)
        if name in EQUALITY_HELPERS and len(call.args) >= 2:
            return "compare", (call.args[0], call.args[1], ast.Eq())
        if name in ("assertTrue", "assertFalse") and call.args:
            return "truth", (call.args[0], name == "assertTrue")
        if name == "assertIsNone" and call.args:
            return "compare", (call.args[0], ast.Constant(None), ast.Is())
    return None


def _analyse(failure: Failure) -> tuple[Symptom, _Code | None]:
    from swe_hidden_tests import find_test_function

    source = scrub(failure.test_source)
    message = scrub(failure.message).strip()
    first = message.splitlines()[0] if message else ""
    tree = ast.parse(source)
    func = find_test_function(tree, failure.function, failure.def_line)
    line = failure.failed_line or (failed_line_of(scrub(failure.text), failure.test_file) if failure.test_file else None)
    stmt = _innermost_statement(func, line) if (func is not None and line) else None
    if stmt is None:
        return Symptom("other", "", None, error=shorten(first or "the test fails"), unresolved=9), None
    code = _Code(failure, source, func, stmt, library_names(tree, failure.package))
    raised = None if (first.startswith("AssertionError") or _assert_values(message) is not None) else first
    if isinstance(stmt, (ast.With, ast.AsyncWith)) and first.startswith("Failed: DID NOT RAISE"):
        body = "\n".join(code.text(s) for s in stmt.body)
        expected_exc = re.sub(r"^Failed: DID NOT RAISE\s*", "", first)
        expected_exc = re.sub(r"^<class '(?:builtins\.)?([\w.]+)'>$", r"\1", expected_exc)
        snippet, unresolved = code.snippet(body)
        return Symptom("no_raise", snippet, code.callee(stmt), expected=expected_exc, unresolved=unresolved), code
    check = _check_of(stmt)
    if check and check[0] == "compare":
        a, b, op = check[1]
        printed = None
        values = _assert_values(message)
        sep = _OP_TEXT.get(type(op))
        if isinstance(stmt, ast.Assert) and values is not None and sep and values.count(sep) == 1 \
                and not (sep == " is " and " is not " in values):
            printed = tuple(values.split(sep))
        elif isinstance(stmt, ast.Expr):
            m = re.match(r"^AssertionError: (.*) != (.*)$", first)  # unittest: "first != second"
            if m and _func_name(stmt.value).startswith("assert"):
                printed = (m.group(1), m.group(2))
        return _comparison(code, a, b, op, printed, shorten(raised, 300) if raised else None), code
    if check and check[0] == "truth":
        subject, wanted = check[1]
        if not _calls(subject) and not isinstance(subject, ast.Name):
            check = None
        else:
            values = _assert_values(message)
            actual = None
            if values is not None:
                actual = values[len("not "):] if values.startswith("not ") else values
            text = code.text(subject)
            if actual is not None and isinstance(subject, ast.Call):
                text = _where_call(message, actual, subject) or text
            if raised:
                snippet, unresolved = code.snippet(text)
                return Symptom("raises", snippet, code.callee(subject), error=shorten(raised, 300),
                               unresolved=unresolved), code
            snippet, unresolved = code.snippet(text, show=True)
            return Symptom("value", snippet, code.callee(subject), actual=actual,
                           expectation="a true value" if wanted else "a false value", unresolved=unresolved), code
    if check and check[0] == "raises" and raised:
        exc, body = check[1]
        snippet, unresolved = code.snippet(code.text(body))
        return Symptom("raises", snippet, code.callee(body), expectation=f"a `{code.text(exc)}`",
                       error=shorten(raised, 300), unresolved=unresolved), code
    subject = _statement_code(stmt, code)
    snippet, unresolved = code.snippet(subject)
    if raised:
        return Symptom("raises", snippet, code.callee(stmt), error=shorten(raised, 300), unresolved=unresolved), code
    return Symptom("other", snippet, code.callee(stmt), error=shorten(first, 300) if first else None,
                   unresolved=unresolved), code


def _statement_code(stmt: ast.stmt, code: _Code) -> str:
    """The failing statement as a user would run it: an ``assert`` becomes its condition, a ``with`` its header."""
    if isinstance(stmt, ast.Assert):
        return code.text(stmt.test)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return code.text(stmt.items[0].context_expr)
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.If)):
        header = code.text(stmt).splitlines()[0]
        return header.rstrip(":").strip()
    return code.text(stmt)


def analyse(failure: Failure) -> Symptom:
    """What went wrong, from the test's failing statement and pytest's message and variables."""
    symptom, code = _analyse(failure)
    if symptom.callee is None and code is not None and symptom.snippet:
        try:  # the call into the project may sit in an earlier line of the snippet: `result = tabulate(...)`
            tree = ast.parse(symptom.snippet)
        except SyntaxError:
            return symptom
        for stmt in reversed(tree.body):
            symptom.callee = code.callee(stmt, symptom.snippet)
            if symptom.callee:
                break
    return symptom


def rank(symptom: Symptom) -> int:
    """How well a symptom reads as an issue (lower is better): a wrong value with both values shown, then an
    exception or a missing one, then the rest; a snippet that names the project's function and defines what it
    reads is better."""
    base = {"value": 0, "no_raise": 2, "raises": 2, "other": 6}[symptom.kind]
    if symptom.kind == "value" and (symptom.actual is None or symptom.expected_text() is None):
        base += 1 if (symptom.actual or symptom.expected_text()) else 5
    return base + (0 if symptom.callee else 2) + 2 * min(symptom.unresolved, 3) + (0 if symptom.snippet else 9)


# ------------------------------------------------------------------------------------------------ wording

_TITLES = {
    "value": ["`{callee}` returns a wrong result", "Unexpected result from `{callee}`", "Wrong output of `{callee}`",
              "`{callee}` gives {actual} instead of {expected}"],
    "raises": ["`{callee}` raises {exc}", "{exc} from `{callee}`", "`{callee}` fails with {exc}",
               "Unexpected {exc} in `{callee}`"],
    "no_raise": ["`{callee}` does not raise {expected}", "No {expected} from `{callee}` for invalid input",
                 "`{callee}` silently accepts invalid input"],
    "other": ["`{callee}` misbehaves", "Problem with `{callee}`", "`{callee}` does not work as expected"],
}
_GENERIC_TITLES = {  # no function name to give
    "value": ["Wrong result in {project}", "Unexpected result with {project} {version}", "Incorrect result"],
    "raises": ["{exc} raised unexpectedly", "Unexpected {exc}", "{exc} with valid input"],
    "no_raise": ["No {expected} for invalid input", "Invalid input is not rejected"],
    "other": ["Something is off in {project}", "Unexpected behaviour in {project} {version}"],
}
_OPENINGS = ["I'm using {project} {version}.", "With {project} {version}:", "{project} version: {version}.",
             "Hi! I ran into this with {project} {version}.", "This happens on {project} {version}."]
_VALUE = ["Running\n\n```python\n{snippet}\n```\n\ngives {actual}, but I expected {expected}.",
          "```python\n{snippet}\n```\n\nprints {actual}. I would expect {expected} here.",
          "When I run\n\n```python\n{snippet}\n```\n\nI get {actual} instead of {expected}.",
          "Minimal example:\n\n```python\n{snippet}\n```\n\nExpected: {expected}\nActual: {actual}"]
_VALUE_BLOCKS = ["Running\n\n```python\n{snippet}\n```\n\nprints\n\n```\n{actual}\n```\n\nbut I expected\n\n```\n{expected}\n```",
                 "This:\n\n```python\n{snippet}\n```\n\ngives me\n\n```\n{actual}\n```\n\ninstead of\n\n```\n{expected}\n```"]
_VALUE_NO_ACTUAL = ["Running\n\n```python\n{snippet}\n```\n\ndoes not give {expected}.",
                    "```python\n{snippet}\n```\n\nshould be {expected}, but the result is different.",
                    "Minimal example:\n\n```python\n{snippet}\n```\n\nI expected {expected}, the result is not that."]
_VALUE_NO_EXPECTED = ["Running\n\n```python\n{snippet}\n```\n\ngives {actual}, which is wrong.",
                      "```python\n{snippet}\n```\n\nprints {actual}; that does not look right."]
_RAISES = ["Running\n\n```python\n{snippet}\n```\n\nfails with\n\n```\n{error}\n```{expect}",
           "This snippet\n\n```python\n{snippet}\n```\n\nraises `{error}`.{expect}",
           "Minimal example:\n\n```python\n{snippet}\n```\n\n```\n{error}\n```{expect}"]
_EXPECT = ["\n\nI expected {expected}.", "\n\nIt should give {expected}.", "\n\nThe result should be {expected}."]
_EXPECT_EXC = ["\n\nI expected {expected}.", "\n\nIt should raise {expected} instead."]
_NO_RAISE = ["```python\n{snippet}\n```\n\nshould raise {expected}, but it does not raise anything.",
             "I expected\n\n```python\n{snippet}\n```\n\nto raise {expected} (the input is invalid), but no exception "
             "is raised.",
             "Calling\n\n```python\n{snippet}\n```\n\ndoes not raise {expected}, so invalid input goes unnoticed."]
_OTHER = ["Running\n\n```python\n{snippet}\n```\n\ndoes not do what I expect:\n\n```\n{error}\n```",
          "This check fails for me:\n\n```python\n{snippet}\n```\n\n```\n{error}\n```"]
_OTHER_NO_ERROR = ["Running\n\n```python\n{snippet}\n```\n\ndoes not give the right result.",
                   "The result of\n\n```python\n{snippet}\n```\n\nis wrong."]
_MORE = ["", "", "Other inputs seem to be affected as well.",
         "I think this affects a few more cases, this is just the smallest one I found.",
         "I noticed similar problems in related calls too."]
_CLOSINGS = ["", "", "Thanks!", "Is this a bug?", "Could you take a look?"]
_SHORT_TITLE = 70


def _as_text(value: str | None) -> str | None:
    """A str repr holding line breaks -> the text itself (tables read better as text)."""
    if value is None:
        return None
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(parsed, str) or "\n" not in parsed or len(parsed) > MAX_TEXT_CHARS:
        return None
    return parsed


def write_statement(symptom: Symptom, project: str, version: str, rng: random.Random, *, more: bool = False) -> str:
    """The issue text for `symptom` (phrasings picked by `rng`)."""
    expected = symptom.expected_text()
    if symptom.kind == "no_raise":
        expected = f"`{symptom.expected}`"
    error = symptom.error or ""
    fields = {"callee": symptom.callee, "project": project, "version": version, "snippet": symptom.snippet,
              "actual": f"`{shorten(symptom.actual)}`" if symptom.actual is not None else "", "expected": expected or "",
              "error": error, "exc": f"`{error.split(':', 1)[0] or 'an exception'}`"}
    pool = _TITLES[symptom.kind] if symptom.callee else _GENERIC_TITLES[symptom.kind]
    titles = [t.format(**fields) for t in pool if ("{actual}" not in t or symptom.actual is not None)
              and ("{expected}" not in t or expected)]
    title = rng.choice([t for t in titles if len(t) <= _SHORT_TITLE] or titles[:1])
    if symptom.kind == "value":
        text_actual, text_expected = _as_text(symptom.actual), _as_text(symptom.expected)
        if text_actual is not None and text_expected is not None:
            body = rng.choice(_VALUE_BLOCKS).format(**{**fields, "actual": text_actual, "expected": text_expected})
        elif symptom.actual is not None and expected:
            body = rng.choice(_VALUE).format(**fields)
        elif expected:
            body = rng.choice(_VALUE_NO_ACTUAL).format(**fields)
        elif symptom.actual is not None:
            body = rng.choice(_VALUE_NO_EXPECTED).format(**fields)
        else:
            body = rng.choice(_OTHER_NO_ERROR).format(**fields)
    elif symptom.kind == "raises":
        pool = _EXPECT_EXC if (symptom.expectation or "").startswith("a `") else _EXPECT
        expect = rng.choice(pool).format(**fields) if expected else ""
        body = rng.choice(_RAISES).format(**fields, expect=expect)
    elif symptom.kind == "no_raise":
        body = rng.choice(_NO_RAISE).format(**fields)
    else:
        body = rng.choice(_OTHER if error else _OTHER_NO_ERROR).format(**fields)
    parts = [title, "", rng.choice(_OPENINGS).format(**fields), "", body]
    tail = " ".join(p for p in ((rng.choice(_MORE) if more else ""), rng.choice(_CLOSINGS)) if p)
    if tail:
        parts += ["", tail]
    return "\n".join(parts).rstrip() + "\n"


__all__ = ["EQUALITY_HELPERS", "Failure", "Symptom", "analyse", "failed_line_of", "library_names", "parse_locals",
           "parse_params", "rank", "scrub", "write_statement"]

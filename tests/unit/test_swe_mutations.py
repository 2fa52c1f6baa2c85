"""The mutation operators on small sources (each finds its site, the result parses and differs by a minimal edit,
the listing is deterministic), and the removal of hidden test functions."""

from __future__ import annotations

import ast
import difflib
import textwrap

import pytest

from swe_hidden_tests import remove_functions
from swe_mutations import OPERATORS, apply_mutation, find_mutations

# one source with at least one site of every operator, each inside a function
SOURCE = textwrap.dedent('''\
    """A module."""
    LIMIT = 3 + 4  # module level: never mutated

    def clamp(values, low=0, strict=True):
        """Docstring."""
        out = []
        for i in range(len(values)):
            v = values[i]
            if v < low and strict:
                raise ValueError("too small")
            if not v:
                continue
            out.append(v + 1)
        total = 0
        total += len(out)
        return out[1:]

    class Box:
        size = 10 - 1  # class body: never mutated

        def get(self, key, default=None):
            result = self.items.get(key)
            if result is None:
                result = default
            return result
''')


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("---", "+++"))]


def test_every_operator_has_a_site_and_each_mutant_parses_and_differs():
    found = find_mutations(SOURCE)
    assert {m.operator for m in found} == set(OPERATORS)
    for m in found:
        mutated = apply_mutation(SOURCE, m)
        ast.parse(mutated)
        assert mutated != SOURCE, m
        assert m.function in ("clamp", "Box.get"), m  # nothing at module or class level


def test_listing_is_deterministic_and_in_source_order():
    first, second = find_mutations(SOURCE), find_mutations(SOURCE)
    assert first == second
    assert [m.key for m in first] == sorted(m.key for m in first)


@pytest.mark.parametrize("operator, before, after", [
    ("comparison", "if v < low and strict:", "if v <= low and strict:"),
    ("bool_op", "if v < low and strict:", "if v < low or strict:"),
    ("exception_type", 'raise ValueError("too small")', 'raise TypeError("too small")'),
    ("negation", "if not v:", "if v:"),
    ("arithmetic", "out.append(v + 1)", "out.append(v - 1)"),
    ("arithmetic", "total += len(out)", "total -= len(out)"),
    ("off_by_one", "return out[1:]", "return out[2:]"),
    ("off_by_one", "for i in range(len(values)):", "for i in range(len(values) - 1):"),
    ("default_arg", "def clamp(values, low=0, strict=True):", "def clamp(values, low=1, strict=True):"),
    ("default_arg", "def clamp(values, low=0, strict=True):", "def clamp(values, low=0, strict=False):"),
    ("return_value", "return result", "return default"),
])
def test_token_level_operators_change_one_line(operator, before, after):
    hits = []
    for m in find_mutations(SOURCE):
        if m.operator != operator:
            continue
        lines = changed_lines(SOURCE, apply_mutation(SOURCE, m))
        if [line[1:].strip() for line in lines] == [before, after]:
            hits.append(m)
    assert hits, f"no {operator} mutation turns {before!r} into {after!r}"


def test_removed_branch_drops_the_if_and_keeps_the_block_valid():
    removed = [m for m in find_mutations(SOURCE) if m.operator == "removed_branch"]
    bodies = {apply_mutation(SOURCE, m) for m in removed}
    assert any("raise ValueError" not in b for b in bodies)  # the guard clause went
    assert any("result = default" not in b for b in bodies)
    src = "def f(x):\n    if x:\n        return 1\n"  # the only statement: replaced by pass
    (m,) = [m for m in find_mutations(src) if m.operator == "removed_branch"]
    assert apply_mutation(src, m) == "def f(x):\n    pass\n"
    elif_src = "def f(x):\n    if x > 1:\n        return 2\n    elif x > 0:\n        return 1\n    return 0\n"
    elifs = [apply_mutation(elif_src, m) for m in find_mutations(elif_src) if m.operator == "removed_branch"]
    assert "def f(x):\n    if x > 1:\n        return 2\n    return 0\n" in elifs


def test_guards_asserts_and_string_concatenation_are_left_alone():
    src = textwrap.dedent('''\
        from typing import TYPE_CHECKING
        def f(a, b):
            if TYPE_CHECKING:
                import os
            assert a < b
            return "x" + a
        if __name__ == "__main__":
            f(1, 2)
    ''')
    ops = [(m.operator, m.line) for m in find_mutations(src)]
    # only the return value is mutable: not the TYPE_CHECKING block (3), the assert (5), the string concatenation
    # (6), the __main__ block (7-8)
    assert ops == []
    src_with_var = src.replace('return "x" + a', 'c = a\n    return c')
    assert [(m.operator, m.line) for m in find_mutations(src_with_var)] == [("return_value", 7)]


def test_multibyte_text_before_a_site_is_handled():
    src = 'def f(a):\n    s = "é—ü"; return a < 1\n'
    (m,) = [m for m in find_mutations(src) if m.operator == "comparison"]
    assert apply_mutation(src, m) == 'def f(a):\n    s = "é—ü"; return a <= 1\n'


def test_operator_tokens_in_comments_and_parentheses():
    src = "def f(a, b):\n    return (a  # a < b here\n            ) < (b)\n"
    (m,) = [m for m in find_mutations(src) if m.operator == "comparison"]
    assert apply_mutation(src, m) == "def f(a, b):\n    return (a  # a < b here\n            ) <= (b)\n"
    src = "def f(a, b):\n    return a is not b, a not in b\n"
    out = sorted(apply_mutation(src, m) for m in find_mutations(src) if m.operator == "comparison")
    assert out == ["def f(a, b):\n    return a is b, a not in b\n", "def f(a, b):\n    return a is not b, a in b\n"]


# ------------------------------------------------------------------------------------------- hidden tests

TESTS = textwrap.dedent('''\
    import pytest


    def test_keep():
        assert 1


    @pytest.mark.parametrize("x", [1, 2])
    def test_hide(x):
        assert x


    def test_keep_too():
        assert 2


    class TestBox:
        def test_only(self):
            assert 3
''')


def test_remove_functions_drops_decorated_tests_and_keeps_spacing():
    out = remove_functions(TESTS, [("test_hide", 9)])  # pytest reports the def line (or a decorator line)
    assert "test_hide" not in out and "parametrize" not in out
    assert "def test_keep():\n    assert 1\n\n\ndef test_keep_too():" in out
    assert remove_functions(TESTS, [("test_hide", 8)]) == out


def test_a_class_left_empty_gets_pass():
    out = remove_functions(TESTS, [("test_only", 18)])
    assert "class TestBox:\n    pass\n" in out
    ast.parse(out)


def test_unknown_test_function_raises():
    with pytest.raises(ValueError, match="test_missing"):
        remove_functions(TESTS, [("test_missing", 1)])

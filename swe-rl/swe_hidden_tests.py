"""Hide the tests that check a fix, as SWE-bench does: they are not in the base commit, the ``test_patch`` adds them.

In SWE-bench the FAIL_TO_PASS tests come with the pull request that fixed the issue, so the repository the agent
starts from does not have them. Here the bug is made, not found: the tests it breaks exist upstream. To keep the
same shape, the base commit has each test *function* that a FAIL_TO_PASS test comes from removed from its file
(decorators included; a class left without a body gets ``pass``), and the instance's ``test_patch`` is the diff that
puts them back. The rest of every test file stays, so the agent can run the project's visible tests as a developer
would; none of them fails on the bug (the generator checks that).

A parametrized test or a test method inherited by several test classes is one function: removing it hides all its
cases, also those the bug does not break (they come back with the test_patch and pass).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable


def _functions(tree: ast.AST) -> list[tuple[ast.AST, list]]:
    """Every (function definition, the statement list that holds it), at module level and in class bodies."""
    out = []
    for parent in ast.walk(tree):
        if isinstance(parent, (ast.Module, ast.ClassDef)):
            for stmt in parent.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((stmt, parent.body))
    return out


def _first_line(node: ast.AST) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def find_test_function(tree: ast.AST, name: str, line: int) -> ast.AST | None:
    """The definition of test function `name` whose decorators-to-``def`` lines hold `line` (1-based; pytest
    reports one of them), else the only definition of that name; None when there is none or it is ambiguous."""
    named = [(f, body) for f, body in _functions(tree) if f.name == name]
    for f, _ in named:
        if _first_line(f) <= line <= f.lineno:
            return f
    return named[0][0] if len(named) == 1 else None


def remove_functions(source: str, targets: Iterable[tuple[str, int]]) -> str:
    """`source` without the test functions `targets` ((name, 1-based line) each). Raises ValueError when one is not
    found or the result does not parse."""
    tree = ast.parse(source)
    holders = {id(f): body for f, body in _functions(tree)}
    nodes = {}
    for name, line in targets:
        node = find_test_function(tree, name, line)
        if node is None:
            raise ValueError(f"no test function {name!r} at line {line}")
        nodes[id(node)] = node
    lines = source.splitlines(keepends=True)
    remaining = {id(body): len(body) for body in holders.values()}
    # bottom-up, so earlier line numbers stay valid
    for node in sorted(nodes.values(), key=lambda n: n.lineno, reverse=True):
        body = holders[id(node)]
        start, end = _first_line(node) - 1, node.end_lineno
        # the blank lines after it go too when blank lines precede it: the file keeps its usual spacing
        while end < len(lines) and not lines[end].strip() and start > 0 and not lines[start - 1].strip():
            end += 1
        remaining[id(body)] -= 1
        indent = lines[node.lineno - 1][: len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
        replacement = [f"{indent}pass\n"] if remaining[id(body)] == 0 and indent else []
        lines[start:end] = replacement
    new = "".join(lines)
    try:
        ast.parse(new)
    except SyntaxError as e:
        raise ValueError(f"removing the tests leaves a file that does not parse: {e}") from None
    return new


__all__ = ["find_test_function", "remove_functions"]

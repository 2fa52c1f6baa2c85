"""Problem statements from the failing behaviour: what the test called, what came back, what was expected, or the
exception; parameters filled in; the wording picked by the seed; the ids of tests between pytest and JUnit."""

from __future__ import annotations

import random
import textwrap

from swe_instances_builder import nodeid_of
from swe_statements import (
    Failure,
    analyse,
    failed_line_of,
    parse_locals,
    parse_params,
    rank,
    scrub,
    write_statement,
)
from slime.agentic.swe.testrun import junit_id

TEST_FILE = textwrap.dedent('''\
    import pytest
    from toolz import get, frequencies
    import inflection


    def test_get():
        assert get(1, 'ABCDE') == 'B'
        assert get([0], 'AB') == ('A',)


    def test_frequencies():
        data = ['a', 'a', 'b']
        counts = frequencies(data)
        assert counts == {'a': 2, 'b': 1}


    @pytest.mark.parametrize("singular, plural", [("cow", "kine")])
    def test_pluralize(singular, plural):
        assert plural == inflection.pluralize(singular)


    def test_raises():
        with pytest.raises(ValueError):
            get(1, 'A', 'bad')


    def test_error():
        assert get(['a', 'z'], {'a': 1}) is None
''')


def failure(function, def_line, failed_line, message, params=None, package="toolz"):
    return Failure(test_source=TEST_FILE, function=function, def_line=def_line, failed_line=failed_line,
                   message=message, params=params or {}, package=package)


def test_wrong_value_with_the_call_pytest_explained():
    s = analyse(failure("test_get", 6, 8, "AssertionError: assert 'A' == ('A',)\n +  where 'A' = "
                                          "<function get at 0x7f12>([0], 'AB')"))
    assert (s.kind, s.callee, s.actual, s.expected) == ("value", "get", "'A'", "('A',)")
    assert s.snippet == "print(get([0], 'AB'))"


def test_earlier_statements_the_failing_one_depends_on_come_along():
    s = analyse(failure("test_frequencies", 11, 14, "AssertionError: assert {'a': 1, 'b': 1} == {'a': 2, 'b': 1}"))
    assert s.kind == "value" and s.actual == "{'a': 1, 'b': 1}" and s.expected == "{'a': 2, 'b': 1}"
    assert s.snippet == "data = ['a', 'a', 'b']\ncounts = frequencies(data)\nprint(counts)"
    assert s.callee == "frequencies"


def test_parameters_are_filled_in_and_the_library_side_is_the_actual_one():
    params = parse_params("singular = 'cow', plural = 'kine'")
    assert params == {"singular": "'cow'", "plural": "'kine'"}
    s = analyse(failure("test_pluralize", 18, 19, "AssertionError: assert 'kine' == 'cine'\n +  where 'cine' = "
                                                "<function pluralize at 0x1>('cow')\n +    where <function pluralize> = "
                                                "inflection.pluralize", params, package="inflection"))
    assert (s.actual, s.expected, s.callee) == ("'cine'", "'kine'", "inflection.pluralize")
    assert "pluralize('cow')" in s.snippet


def test_exceptions_and_missing_exceptions():
    s = analyse(failure("test_error", 27, 28, "KeyError: 'z'"))
    assert (s.kind, s.error, s.expected, s.callee) == ("raises", "KeyError: 'z'", "None", "get")
    assert s.snippet == "get(['a', 'z'], {'a': 1})"
    s = analyse(failure("test_raises", 22, 23, "Failed: DID NOT RAISE <class 'ValueError'>"))
    assert (s.kind, s.expected, s.snippet) == ("no_raise", "ValueError", "get(1, 'A', 'bad')")


UNITTEST_FILE = textwrap.dedent('''\
    import unittest
    from cachetools import LRUCache
    from tabulate import tabulate
    from .helpers import assert_equal


    class CacheTest(unittest.TestCase):
        Cache = LRUCache

        def test_popitem(self):
            cache = self.Cache(maxsize=2)
            cache[1] = 1
            self.assertEqual(1, cache[1])


    def test_table():
        rows = [["a", 1]]
        result = tabulate(rows)
        assert_equal("-  -\\na  1\\n-  -", result)
''')

TRACEBACK = """\
    def test_table():
        rows = [["a", 1]]
        result = tabulate(rows)
>       assert_equal("-  -\\na  1\\n-  -", result)

result     = ('-  -\\n'
 'a  2\\n'
 '-  -')
rows       = [['a', 1]]

test/test_output.py:19: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 
"""


def test_unittest_style_and_helpers_with_locals():
    s = analyse(Failure(test_source=UNITTEST_FILE, function="test_popitem", def_line=10, failed_line=13,
                        message="AssertionError: 1 != 2", package="cachetools", self_attrs={"Cache": "LRUCache"}))
    assert (s.kind, s.actual, s.expected) == ("value", "2", "1")  # expected first, as the test wrote it
    assert s.snippet == "cache = LRUCache(maxsize=2)\ncache[1] = 1\nprint(cache[1])"
    assert s.callee == "LRUCache"
    # a helper's assertion is not rewritten by pytest: the values come from the test's variables (--showlocals)
    assert parse_locals(TRACEBACK, "test/test_output.py") == {"result": repr("-  -\na  2\n-  -"), "rows": "[['a', 1]]"}
    s = analyse(Failure(test_source=UNITTEST_FILE, function="test_table", def_line=16, message="AssertionError",
                        text=TRACEBACK, test_file="test/test_output.py", package="tabulate"))
    assert (s.kind, s.callee) == ("value", "tabulate")
    assert s.actual == repr("-  -\na  2\n-  -") and s.expected == '"-  -\\na  1\\n-  -"'
    assert s.snippet == 'rows = [["a", 1]]\nresult = tabulate(rows)\nprint(result)'
    text = write_statement(s, "tabulate", "0.10.0", random.Random(0))
    assert "a  2" in text and "a  1" in text and "```\n-  -\na  2\n-  -\n```" in text  # tables shown as text


def test_unreadable_failures_still_give_a_symptom():
    s = analyse(failure("test_get", 6, None, "Something odd"))
    assert s.kind == "other" and "Something odd" in s.error
    assert rank(s) > rank(analyse(failure("test_get", 6, 8, "AssertionError: assert 'A' == ('A',)")))


def test_params_line_keeps_only_python_values():
    assert parse_params("a = 1, b = <object object at 0x7f>, c = 'x, y = 2'") == {"a": "1", "c": "'x, y = 2'"}
    assert parse_params("def test_x():") == {}
    assert parse_params("d = datetime.date(2008, 2, 29)") == {"d": "datetime.date(2008, 2, 29)"}


def test_failed_line_and_scrubbing():
    text = "lib/x.py:3: in f\n    ...\ntoolz/tests/test_a.py:12: AssertionError"
    assert failed_line_of("toolz/tests/test_a.py:8: \n" + text, "toolz/tests/test_a.py") == 8
    assert failed_line_of(text, "tests/other.py") is None
    assert scrub("<Foo object at 0x7f00aa> in /testbed/pkg /tmp/pytest-of-u/pytest-3/t0") == "<Foo object> in pkg /tmp/t0"


def test_wording_is_deterministic_per_seed_and_varies_between_seeds():
    s = analyse(failure("test_get", 6, 8, "AssertionError: assert 'A' == ('A',)\n +  where 'A' = get([0], 'AB')"))
    texts = [write_statement(s, "toolz", "1.2.0", random.Random(f"0:{i}"), more=True) for i in range(12)]
    assert texts[0] == write_statement(s, "toolz", "1.2.0", random.Random("0:0"), more=True)
    assert len(set(texts)) > 4
    for text in texts:
        assert "toolz 1.2.0" in text or "toolz version: 1.2.0" in text
        assert "get([0], 'AB')" in text and "'A'" in text and "('A',)" in text
        assert "diff" not in text and "itertoolz.py" not in text


def test_statement_kinds_render():
    rng = random.Random(1)
    raises = analyse(failure("test_error", 27, 28, "KeyError: 'z'"))
    assert "KeyError: 'z'" in write_statement(raises, "toolz", "1.2.0", rng)
    no_raise = analyse(failure("test_raises", 22, 23, "Failed: DID NOT RAISE <class 'ValueError'>"))
    assert "`ValueError`" in write_statement(no_raise, "toolz", "1.2.0", rng)


def test_pytest_and_junit_ids_map_both_ways():
    files = {"tests/test_lru.py", "toolz/tests/test_itertoolz.py", "test_inflection.py"}
    for nodeid, jid in [
        ("tests/test_lru.py::LRUCacheTest::test_clear", "tests.test_lru.LRUCacheTest::test_clear"),
        ("toolz/tests/test_itertoolz.py::test_get", "toolz.tests.test_itertoolz::test_get"),
        ("test_inflection.py::test_camelize[a::b-c/d]", "test_inflection::test_camelize[a::b-c/d]"),
    ]:
        assert junit_id(nodeid) == jid
        assert nodeid_of(jid, files) == nodeid
    assert nodeid_of("nowhere.mod::test_x", files) is None

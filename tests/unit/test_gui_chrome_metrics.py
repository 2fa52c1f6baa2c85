"""OSWorld's Chrome metrics and URL rules, pure: compare_urls (scheme added, a lone `www` dropped, the public suffix
ignored, a trailing / ignored), the tab-list and active-tab checks, and the address bar's text."""

from __future__ import annotations

import asyncio
from pathlib import Path

from slime.agentic.gui.evaluators import GETTERS, METRICS, EvalEnv
from slime.agentic.gui.evaluators.chrome import (address_bar_text, compare_urls, is_expected_active_tab,
                                                 is_expected_active_tab_approximate, is_expected_tabs)


def test_compare_urls_as_osworld_normalises_them():
    assert compare_urls("https://www.airbnb.com/", "https://airbnb.com.sg")  # www and the suffix do not count
    assert compare_urls("example.com/a", "http://www.example.com/a")  # no scheme: http
    assert not compare_urls("https://example.com/a", "http://example.com/a")  # the scheme counts
    assert not compare_urls("https://maps.example.com/", "https://example.com/")  # another subdomain counts
    assert not compare_urls("https://example.com/a?x=1", "https://example.com/a?x=2")
    assert compare_urls("https://example.com/a?x=1", "https://example.com/a?x=2", full=False)
    assert compare_urls(None, None) and not compare_urls(None, "https://example.com")


def test_the_tab_checks():
    tabs = [{"title": "A", "url": "https://www.a.com/"}, {"title": "B", "url": "https://b.org/x"}]
    rule = {"type": "url", "urls": ["https://b.org/x", "https://a.com"]}
    assert METRICS["is_expected_tabs"] is is_expected_tabs
    assert is_expected_tabs(tabs, rule) == 1.0  # order does not matter
    assert is_expected_tabs(tabs + [{"title": "C", "url": "https://c.net"}], rule) == 0.0  # one more tab
    assert is_expected_tabs([], rule) == 0.0
    assert is_expected_active_tab({"url": "https://www.b.org/x"}, {"type": "url", "url": "https://b.org/x"}) == 1.0
    assert is_expected_active_tab("https://b.org/y", {"type": "url", "url": "https://b.org/x"}) == 0.0
    assert is_expected_active_tab(None, {"type": "url", "url": "https://b.org/x"}) == 0.0
    approx = {"type": "url", "url": "https://b.org/search?q=1"}
    assert is_expected_active_tab_approximate({"url": "https://b.org/search?q=2"}, approx) == 1.0
    assert is_expected_active_tab_approximate({"url": "https://www.b.org/search"}, approx) == 0.0  # no normalising


def test_the_address_bar_elides_the_scheme_and_www():
    assert address_bar_text("https://www.google.com/search?q=1") == "google.com/search?q=1"
    assert address_bar_text("http://example.org/") == "example.org/"
    assert address_bar_text("file:///home/user/a.html") == "file:///home/user/a.html"


class _Desktop:
    """What a desktop answers for `slime-cdp`: here something on the DevTools port that is not Chrome."""

    def __init__(self, returncode: int, output: str):
        self.reply = {"returncode": returncode, "output": output, "error": ""}

    async def execute(self, command, **kwargs):
        return self.reply


def test_a_port_that_does_not_answer_as_chrome_gives_no_tabs(tmp_path):
    # the agent's code can put anything on the desktop's port 1337: output that is not DevTools' JSON is no browser
    for desktop in (_Desktop(0, "<html>not json</html>"), _Desktop(1, "")):
        env = EvalEnv(client=desktop, cache_dir=Path(tmp_path))
        assert asyncio.run(GETTERS["open_tabs_info"](env, {})) == []
        assert asyncio.run(GETTERS["active_tab_info"](env, {})) is None
        assert asyncio.run(GETTERS["active_url_from_accessTree"](env, {})) is None

"""OSWorld's Chrome getters and metrics (``desktop_env/evaluators/getters/chrome.py``, ``metrics/chrome.py``), over
Chrome's DevTools endpoint inside the desktop (``slime-cdp``, in the desktop's ``bin``: chromium runs with OSWorld's
port 1337 on the desktop's own loopback; an OSWorld VM's Chrome answers there too, but has no ``slime-cdp``).

Getters:

    open_tabs_info               [{title, url}] of every open tab, in the browser's order ([] when no browser answers)
    active_tab_info              {title, url, content} of the tab the window shows: the tab whose title is the
                                 window's ("<title> - Chromium"), its document as HTML (OSWorld loads the URL again
                                 in a new page for it; here it is the tab's document as it is); None without one
    active_url_from_accessTree   `goto_prefix` (default ``https://``) + the address bar's text, which OSWorld reads
                                 from the accessibility tree; here the active tab's URL as Chrome's address bar shows
                                 it (``http(s)://`` and a leading ``www.`` elided, as Chrome does by default)
    active_tab_url_parse         that URL's query values for `parse_keys` ('' when absent), renamed by `replace`,
                                 split at commas with `split_list`

Metrics: ``is_expected_tabs`` (the open tabs' URLs equal the rule's `urls` as sets of the same size),
``is_expected_active_tab`` and ``is_expected_active_tab_approximate`` (without the query), URLs compared as
OSWorld's ``compare_urls`` does: scheme added when missing, ``www`` dropped when it is the only subdomain, the public
suffix ignored (``airbnb.com`` = ``airbnb.com.sg``), a lone trailing ``/`` ignored.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any
from urllib.parse import ParseResult, parse_qs, urlparse, urlunparse

from .getters import EvalEnv, EvaluationError

CDP_TOOL = "slime-cdp"


async def _cdp(env: EvalEnv, *args: str):
    result = await env.client.execute([CDP_TOOL, *args], timeout=60)
    if result.get("returncode") != 0:
        return None  # no browser answers: as OSWorld's getters, an empty result
    output = result.get("output", "")
    if args[0] == "html":
        return output
    try:
        return json.loads(output or "null")
    except json.JSONDecodeError:  # what answered on the port is not Chrome's DevTools: no browser, as OSWorld scores it
        return None


async def get_open_tabs_info(env: EvalEnv, config: dict):
    tabs = await _cdp(env, "tabs")
    return [{"title": t["title"], "url": t["url"]} for t in tabs or []]


def address_bar_text(url: str) -> str:
    """What Chrome's address bar shows for `url` by default: no ``http(s)://``, no leading ``www.``."""
    text = re.sub(r"^https?://", "", url)
    return text[4:] if text.startswith("www.") else text


async def get_active_url_from_accessTree(env: EvalEnv, config: dict):
    tab = await _cdp(env, "active")
    if not tab:
        return None
    return f"{config.get('goto_prefix', 'https://')}{address_bar_text(tab['url'])}"


async def get_active_tab_info(env: EvalEnv, config: dict):
    tab = await _cdp(env, "active")
    if not tab:
        return None
    content = await _cdp(env, "html", tab["id"])
    return {"title": tab["title"], "url": tab["url"], "content": content or ""}


async def get_active_tab_url_parse(env: EvalEnv, config: dict):
    url = await get_active_url_from_accessTree(env, config)
    if url is None:
        return None
    if "parse_keys" not in config:
        raise EvaluationError("active_tab_url_parse needs parse_keys")
    query = parse_qs(urlparse(url).query)
    params = {key: query.get(key, [""])[0] for key in config["parse_keys"]}
    for old, new in config.get("replace", {}).items():
        params[new] = params.pop(old)
    if config.get("split_list", False):
        params = {key: value.split(",") for key, value in params.items()}
    return params


CHROME_GETTERS = {"open_tabs_info": get_open_tabs_info, "active_tab_info": get_active_tab_info,
                  "active_url_from_accessTree": get_active_url_from_accessTree,
                  "active_tab_url_parse": get_active_tab_url_parse}

# ------------------------------------------------------------------------------------------------------ metrics

@functools.lru_cache(maxsize=1)
def _suffixes():
    import tldextract

    # the public suffix list tldextract ships, never fetched (no network here, and a fixed list scores the same URL
    # the same way every time)
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _extract(netloc: str):
    return _suffixes()(netloc)


def normalize_url(url: str, full: bool = True) -> str:
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://", url):
        url = f"http://{url}"
    parsed = urlparse(url)
    parts = _extract(parsed.netloc.lower())
    subdomain = "" if parts.subdomain == "www" else parts.subdomain
    netloc = f"{subdomain}.{parts.domain}" if subdomain else parts.domain
    path = parsed.path if parsed.path != "/" else ""
    return urlunparse(ParseResult(scheme=parsed.scheme.lower(), netloc=netloc, path=path,
                                  params=parsed.params if full else "", query=parsed.query if full else "",
                                  fragment=parsed.fragment if full else ""))


def compare_urls(url1: str | None, url2: str | None, full: bool = True) -> bool:
    if url1 is None or url2 is None:
        return url1 == url2
    return normalize_url(url1, full) == normalize_url(url2, full)


def _same_lists(expected: list, actual: list, same) -> bool:
    return len(expected) == len(actual) and all(any(same(e, a) for a in actual) for e in expected)


def _url_of(info: Any) -> str | None:
    return info.get("url") if isinstance(info, dict) else info


def is_expected_tabs(open_tabs, rule: dict) -> float:
    if not open_tabs:
        return 0.0
    if rule["type"] != "url":
        return 0.0  # OSWorld logs an unknown type and scores 0
    return float(_same_lists(rule["urls"], [t["url"] for t in open_tabs], compare_urls))


def is_expected_active_tab(active_tab_info, rule: dict) -> float:
    if not active_tab_info or rule["type"] != "url":
        return 0.0
    return float(compare_urls(rule["url"], _url_of(active_tab_info)))


def is_expected_active_tab_approximate(active_tab_info, rule: dict) -> float:
    """The URLs equal once their queries are dropped (nothing else normalized, as OSWorld's)."""
    if not active_tab_info or rule["type"] != "url":
        return 0.0
    actual = _url_of(active_tab_info)
    if actual is None:
        return 0.0
    return float(_without_query(rule["url"]) == _without_query(actual))


def _without_query(url: str) -> str:
    return urlunparse(urlparse(url)._replace(query=""))


CHROME_METRICS = (is_expected_tabs, is_expected_active_tab, is_expected_active_tab_approximate)

__all__ = ["CHROME_GETTERS", "CHROME_METRICS", "address_bar_text", "compare_urls", "get_active_tab_info",
           "get_active_tab_url_parse", "get_active_url_from_accessTree", "get_open_tabs_info", "is_expected_active_tab",
           "is_expected_active_tab_approximate", "is_expected_tabs", "normalize_url"]

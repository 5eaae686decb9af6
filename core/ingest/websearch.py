"""Web addresses for research runs: found in text and pages, or by a web search.

The research tool ``fetch_url`` opens only addresses that appeared in the run; they come from
:func:`find_urls` (http(s) addresses written in a question or a passage), :func:`page_links`
(the links of a fetched page's main content) and a web search provider (below).

The research tool ``web_search`` exists only when the run allows the web, ``web.enabled`` is on
and ``web.search_provider`` names a usable provider (:func:`search_provider` returns None
otherwise, and the tool is simply absent). Two providers:

- **SearXNG** (``search_provider = "searxng"``, ``searxng_url``): ``GET <url>/search?q=...&
  format=json`` on the user's own instance (its JSON format must be enabled in its
  ``settings.yml``: ``search: formats: [html, json]``). Results come from ``results[]``
  (``title``, ``url``, ``content``).
- **Brave Search API** (``search_provider = "brave"``): ``GET https://api.search.brave.com/res/v1/
  web/search?q=...&count=N`` with the key in the ``X-Subscription-Token`` header, read from the
  environment variable ``web.search_api_key_env`` (default ``BRAVE_SEARCH_API_KEY``) or, less
  safely, ``web.search_api_key``. Results come from ``web.results[]`` (``title``, ``url``,
  ``description``; Brave marks matches with ``<strong>``, which is removed).

Network rules are those of :mod:`core.ingest.web`: the request goes through the same guarded
transport (every address checked, the connection pinned to the checked address, no proxies from
the environment, no cookies), with ``web.timeout_s`` per operation and for the whole response,
and a body cap (the smaller of ``web.max_bytes`` and 2 MB). Redirects are not followed. A
SearXNG instance is a configured service and may well run on this machine, but it gets **no
exemption** from the SSRF rule: a local instance must be allowed explicitly, by its exact
``host:port`` in ``web.local_allowlist`` (e.g. ``localhost:8888``) or with
``web.allow_local_hosts``. Failures raise :class:`~core.errors.WebAccessError` with a hint.

Results are data: titles and snippets are shown to a model, never followed as instructions;
their URLs only become addresses ``fetch_url`` may open.
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from selectolax.lexbor import LexborHTMLParser

from core.errors import WebAccessError
from core.ingest.web import (
    ENABLE_HINT,
    USER_AGENT,
    AddressGuard,
    GuardedTransport,
    normalise_url,
    read_capped,
)
from core.settings import WebSettings

logger = logging.getLogger(__name__)

BRAVE_ENDPOINT = "https://api.search.brave.com/res/v1/web/search"
MAX_SEARCH_BYTES = 2_000_000
_TAG = re.compile(r"<[^>]{0,200}>")


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One web search hit: what the model sees, and an address ``fetch_url`` may then open."""

    title: str
    url: str
    snippet: str


class SearchProvider(Protocol):
    """A web search backend. Implementations are immutable and thread-safe."""

    name: str

    def search(self, query: str, *, count: int) -> list[SearchResult]:
        """Up to ``count`` results for ``query``; raises WebAccessError."""
        ...


def _clean(text: Any, limit: int) -> str:
    s = html.unescape(_TAG.sub("", str(text or "")))
    return " ".join(s.split())[:limit]


def _results(items: Any, snippet_key: str, count: int) -> list[SearchResult]:
    """Valid http(s) results, normalised and without repeats (anything else is skipped)."""
    out: list[SearchResult] = []
    seen: set[str] = set()
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            url = normalise_url(str(item.get("url") or ""))
        except WebAccessError:
            continue
        if url in seen:
            continue
        seen.add(url)
        title = _clean(item.get("title"), 160) or httpx.URL(url).host
        out.append(SearchResult(title=title, url=url, snippet=_clean(item.get(snippet_key), 300)))
        if len(out) >= count:
            break
    return out


class _JsonClient:
    """GET one JSON document through the guarded transport (see the module docstring)."""

    def __init__(self, web: WebSettings, transport: httpx.BaseTransport | None) -> None:
        self._web = web
        self._transport = transport

    def get(self, what: str, url: str, params: dict[str, str], headers: dict[str, str]) -> Any:
        web = self._web
        if not web.enabled:
            msg = f"Web access is off, so {what} was not asked."
            raise WebAccessError(msg, path=url, hint=ENABLE_HINT)
        own = self._transport is None
        tx = self._transport or GuardedTransport(AddressGuard.from_settings(web))
        capped = web.model_copy(update={"max_bytes": min(web.max_bytes, MAX_SEARCH_BYTES)})
        request = httpx.Request(
            "GET",
            httpx.URL(url, params=params),
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
                "Accept-Encoding": "gzip, deflate",
                **headers,
            },
            extensions={"timeout": httpx.Timeout(web.timeout_s).as_dict()},
        )
        deadline = time.monotonic() + web.timeout_s
        try:
            try:
                response = tx.handle_request(request)
            except WebAccessError:
                raise
            except httpx.TimeoutException as exc:
                raise WebAccessError(
                    f"{what} did not answer within {web.timeout_s:g} s.",
                    path=url,
                    hint="Try again later, or raise `web.timeout_s`.",
                ) from exc
            except httpx.HTTPError as exc:
                raise WebAccessError(
                    f"{what} could not be reached: {exc}.",
                    path=url,
                    hint="Check `web.searxng_url` / the network connection.",
                ) from exc
            response.request = request
            try:
                _check_status(what, url, response)
                body = read_capped(response, url, capped, deadline)
            finally:
                response.close()
        finally:
            if own:
                tx.close()
        try:
            return json.loads(body)
        except ValueError as exc:
            raise WebAccessError(
                f"{what} did not answer with JSON.",
                path=url,
                hint="For SearXNG, enable the JSON format (`search: formats: [html, json]`).",
            ) from exc


def _check_status(what: str, url: str, response: httpx.Response) -> None:
    code = response.status_code
    if code == 200:
        return
    if 300 <= code < 400:
        hint = "Set the final address of the service (redirects are not followed)."
        raise WebAccessError(f"{what} redirected ({code}).", path=url, hint=hint)
    if code in (401, 403):
        hint = (
            "Check the API key (`web.search_api_key_env`); for SearXNG, enable the JSON format "
            "(`search: formats: [html, json]`)."
        )
        raise WebAccessError(f"{what} refused the request ({code}).", path=url, hint=hint)
    if code == 429:
        hint = "Wait a little, or lower how often research runs search."
        raise WebAccessError(f"{what} is rate-limiting requests (429).", path=url, hint=hint)
    raise WebAccessError(f"{what} answered {code}.", path=url, hint="Try again later.")


class SearxngSearch:
    """A SearXNG instance's JSON API. Immutable; thread-safe."""

    name = "searxng"

    def __init__(
        self, base_url: str, web: WebSettings, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.base_url = normalise_url(base_url).rstrip("/")
        self._client = _JsonClient(web, transport)

    def search(self, query: str, *, count: int) -> list[SearchResult]:
        data = self._client.get(
            "The SearXNG instance",
            f"{self.base_url}/search",
            {"q": query, "format": "json"},
            {},
        )
        items = data.get("results") if isinstance(data, dict) else None
        return _results(items, "content", count)


class BraveSearch:
    """The Brave Search API (web results). Immutable; thread-safe. The key is never logged."""

    name = "brave"

    def __init__(
        self, api_key: str, web: WebSettings, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self._key = api_key
        self._client = _JsonClient(web, transport)

    def __repr__(self) -> str:
        return "BraveSearch(api_key=***)"

    def search(self, query: str, *, count: int) -> list[SearchResult]:
        data = self._client.get(
            "The Brave Search API",
            BRAVE_ENDPOINT,
            {"q": query, "count": str(max(1, min(count, 20)))},
            {"X-Subscription-Token": self._key},
        )
        web = data.get("web") if isinstance(data, dict) else None
        items = web.get("results") if isinstance(web, dict) else None
        return _results(items, "description", count)


def search_provider(
    web: WebSettings, *, transport: httpx.BaseTransport | None = None
) -> SearchProvider | None:
    """The configured provider, or None (web off, no provider, or a Brave key missing: then a
    warning is logged and research runs simply have no ``web_search`` tool)."""
    if not web.enabled or web.search_provider is None:
        return None
    if web.search_provider == "searxng":
        if not web.searxng_url:
            return None  # WebSettings refuses this combination; kept for constructed settings
        try:
            return SearxngSearch(web.searxng_url, web, transport=transport)
        except WebAccessError as exc:
            logger.warning("web search disabled: %s", exc)
            return None
    key = web.search_api_key or os.environ.get(web.search_api_key_env, "")
    if not key.strip():
        logger.warning(
            "web.search_provider is brave but %s is not set; web search is disabled",
            web.search_api_key_env,
        )
        return None
    return BraveSearch(key.strip(), web, transport=transport)


# ---------------------------------------------------------------------- addresses in text

# An http(s) address written in running text: stops at whitespace, quotes, angle brackets and
# the brackets that usually enclose a link in prose; trailing punctuation is trimmed afterwards.
_TEXT_URL_RE = re.compile(r"https?://[^\s<>\"'`{}|\\^\[\]]+", re.IGNORECASE)
_TRAILING = ".,;:!?*_~"
# Link containers that are page furniture, not content (as in read_web_html).
_FURNITURE = frozenset({"nav", "header", "footer", "aside", "form", "menu", "dialog"})


def find_urls(text: str) -> list[str]:
    """The http(s) addresses written in ``text``, normalised, in order, without repeats.

    Trailing sentence punctuation and an unmatched closing parenthesis are not part of an
    address; anything :func:`normalise_url` refuses (credentials, bad hosts) is skipped.
    """
    out: list[str] = []
    for m in _TEXT_URL_RE.finditer(text):
        raw = m.group(0)
        while raw and (
            raw[-1] in _TRAILING or (raw[-1] == ")" and raw.count("(") < raw.count(")"))
        ):
            raw = raw[:-1]
        try:
            url = normalise_url(raw)
        except WebAccessError:
            continue
        if url not in out:
            out.append(url)
    return out


def page_links(body: bytes, base_url: str, *, limit: int = 20) -> list[tuple[str, str]]:
    """``(anchor text, absolute URL)`` for the links in a page's main content, in order.

    Only http(s) targets, resolved against ``base_url``, normalised, without repeats and without
    links back to the page itself; links inside navigation, headers, footers, asides and forms
    are left out (the same furniture :func:`core.ingest.text.read_web_html` drops). Parsing
    only: nothing is fetched or executed.
    """
    tree = LexborHTMLParser(body.decode("utf-8", errors="replace"))
    articles = tree.css("article")
    root = (
        tree.css_first("main")
        or tree.css_first("[role=main]")
        or (articles[0] if len(articles) == 1 else None)
        or tree.body
    )
    if root is None:
        return []
    try:
        base = httpx.URL(normalise_url(base_url))
    except WebAccessError:
        return []
    self_url = str(base)
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for a in root.css("a[href]"):
        node, furniture = a.parent, False
        while node is not None and node is not root:
            if node.tag in _FURNITURE or node.attributes.get("role") == "navigation":
                furniture = True
                break
            node = node.parent
        href = (a.attributes.get("href") or "").strip()
        if furniture or not href or href.startswith("#"):
            continue
        try:
            url = normalise_url(str(base.join(href)))
        except (WebAccessError, httpx.InvalidURL, ValueError):
            continue
        if url == self_url or url in seen:
            continue
        seen.add(url)
        out.append((" ".join(a.text(separator=" ").split())[:80], url))
        if len(out) >= limit:
            break
    return out

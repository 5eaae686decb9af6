"""Fetching a web page (or a PDF on the web) safely, as a library document.

:func:`fetch_url` is the one entry point (``sourcebook add URL`` and the research tools use it):

- **Off by default.** With ``web.enabled`` off it raises :class:`WebAccessError` before any
  name lookup or connection.
- **Only http and https**, no user names or passwords in URLs, no cookies, no proxies or
  ``.netrc`` from the environment (the transport is used directly, without an ``httpx.Client``).
- **No way in to local or internal services (SSRF).** Every connection, for the first request and
  for every redirect, goes through :class:`_GuardedBackend`: it resolves the host, refuses the
  whole host if *any* address is loopback, private, link-local, multicast, reserved,
  unspecified, shared (CGNAT) or a cloud metadata address (also inside IPv4-mapped, 6to4, Teredo
  or NAT64 IPv6 addresses), and then connects to exactly the address it checked, so a DNS answer
  that changes between check and connect (rebinding) cannot slip through. ``web.allow_local_hosts``
  lifts the rule; ``web.local_allowlist`` lifts it for exact ``host:port`` entries only.
- **Caps.** ``web.timeout_s`` per network operation and for the whole download,
  ``web.max_bytes`` on the (decoded) body, streamed and cut off as soon as it is exceeded,
  ``web.max_redirects`` hops, each re-checked.
- **Content.** HTML becomes main-content text (:func:`core.ingest.text.read_web_html`: no
  scripts, styles, navigation, headers, footers, asides or forms; headings kept); a PDF goes
  through the PDF reader (with OCR for scans); plain text is read as text; anything else is
  refused with the type named. Page text is data: it is never executed or followed.
- **Provenance.** The fetched bytes are kept as ``<store_dir>/<sha256>.<html|pdf|txt>`` with a
  ``<sha256>.json`` record (URL asked, final URL, fetch time, status, content type), so a
  citation points at the version that was read. The document's ``source_key`` is
  ``url:<normalised URL>``: the same URL with different bytes later becomes a new version.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import socket
import time
import typing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import httpcore
import httpx

from core.errors import IngestError, WebAccessError
from core.ingest import TokenCounter, _assemble
from core.ingest.encoding import DecodedText, decode_text
from core.ingest.ocr import OcrProgress
from core.ingest.pdf import read_pdf
from core.ingest.text import TextContent, read_plain, read_web_html
from core.settings import Settings, WebSettings
from graph.ids import sha256_bytes
from graph.schemas import IngestedDocument

logger = logging.getLogger(__name__)

USER_AGENT = "Sourcebook/0.1 (offline research assistant; fetches pages a user asked for)"
ENABLE_HINT = (
    "Web access is off by default. Set `web.enabled` to true in settings.json "
    "(or the environment variable SOURCEBOOK_WEB__ENABLED=1) to allow it."
)
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
_PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
_SNIFF_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})

# Addresses that are reachable from many cloud VMs and hand out credentials; most are also
# link-local or private, listed here so the rule does not depend on that.
_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean ...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IPv6 metadata
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server (a public address!)
        "192.0.0.192",  # Oracle Cloud
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def looks_like_url(text: str) -> bool:
    """True for ``scheme://...`` strings (``sourcebook add`` sends those here, not to files)."""
    return bool(_URL_RE.match(text.strip()))


def normalise_url(url: str) -> str:
    """The canonical form used in ``source_key``: lower-case scheme and host, IDNA host, no
    default port, no fragment, ``/`` for an empty path. Raises WebAccessError for other schemes,
    credentials in the URL or a missing host."""
    raw = url.strip()
    try:
        u = httpx.URL(raw)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise WebAccessError(f"{raw!r} is not a valid URL ({exc}).", path=raw) from exc
    if u.scheme not in ("http", "https"):
        raise WebAccessError(
            f"Only http:// and https:// addresses can be fetched, not {u.scheme}://.",
            path=raw,
            hint="Add local files by their path instead.",
        )
    if u.userinfo:
        raise WebAccessError(
            "Addresses with a user name or password are not fetched.",
            path=raw,
            hint="Remove the credentials from the address.",
        )
    if not u.host:
        raise WebAccessError(f"{raw!r} has no host name.", path=raw)
    return str(u.copy_with(fragment=None, path=u.path or "/"))


# ---------------------------------------------------------------------- the address guard


def refusal_reason(ip: IPAddress) -> str | None:
    """Why a connection to ``ip`` is refused (None: a public address)."""
    if ip in _METADATA:
        return "a cloud metadata address"
    embedded: list[IPAddress] = []
    if isinstance(ip, ipaddress.IPv6Address):
        for v4 in (ip.ipv4_mapped, ip.sixtofour, ip.teredo[1] if ip.teredo else None):
            if v4 is not None:
                embedded.append(v4)
        if ip in _NAT64:
            embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    for inner in embedded:
        why = refusal_reason(inner)
        if why is not None:
            return f"{why} (inside {ip})"
    for attr, what in (
        ("is_unspecified", "an unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_private", "a private network address"),
        ("is_reserved", "a reserved address"),
    ):
        if getattr(ip, attr):
            return what
    if not ip.is_global:
        return "a non-public address"
    return None


@dataclass(frozen=True, slots=True)
class AddressGuard:
    """Decides which addresses may be connected to (see the module docstring).

    Immutable, so safe from any thread. ``resolve`` is the single place names are looked up.
    """

    allow_local: bool = False
    allowlist: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def from_settings(cls, web: WebSettings) -> AddressGuard:
        entries: set[tuple[str, int]] = set()
        for item in web.local_allowlist:
            host, _, port = item.strip().rpartition(":")
            if host and port.isdigit():
                entries.add((host.strip("[]").lower(), int(port)))
        return cls(web.allow_local_hosts, frozenset(entries))

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        """The addresses of ``host`` that may be connected to; raises WebAccessError if any
        address is refused or the name does not resolve."""
        name = host.strip("[]").lower()
        try:
            literal: IPAddress | None = ipaddress.ip_address(name)
        except ValueError:
            literal = None
        if literal is not None:
            ips = [literal]
        else:
            try:
                infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError) as exc:
                raise WebAccessError(
                    f"The host {name} could not be found ({exc}).",
                    path=host,
                    hint="Check the address and the network connection.",
                ) from exc
            ips = []
            for info in infos:
                ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
                if ip not in ips:
                    ips.append(ip)
            if not ips:
                raise WebAccessError(f"The host {name} has no address.", path=host)
        if self.allow_local:
            return ips
        for ip in ips:
            why = refusal_reason(ip)
            if why is None:
                continue
            if (name, port) in self.allowlist or (str(ip), port) in self.allowlist:
                continue
            raise WebAccessError(
                f"Refused to connect to {name}: it resolves to {ip}, {why}.",
                path=host,
                hint="Sourcebook does not fetch local or internal addresses; set "
                "`web.allow_local_hosts` (or list the host:port in `web.local_allowlist`) "
                "only if you trust that server.",
            )
        return ips


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's network backend, connecting only to addresses the guard accepted.

    Every new connection (first request and each redirect) passes through ``connect_tcp``: the
    host is resolved and checked once, and the socket connects to that checked address (TLS
    still verifies the certificate against the host name). Thread-safe: holds no state.
    """

    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        ips = self._guard.resolve(host, port)
        last: Exception | None = None
        for ip in ips:
            try:
                return self._inner.connect_tcp(
                    str(ip), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise WebAccessError("Unix sockets are not used for web pages.", path=path)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class GuardedTransport(httpx.HTTPTransport):
    """httpx's transport with its connection pool on :class:`_GuardedBackend`.

    Ignores proxy variables, ``.netrc`` and SSL env settings (``trust_env=False``): a proxy would
    resolve names itself and bypass the guard. Threading: like httpx's transport (thread-safe).
    """

    def __init__(self, guard: AddressGuard) -> None:
        super().__init__(trust_env=False, retries=0)
        ssl_context = httpx.create_ssl_context(trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=4,
            max_keepalive_connections=2,
            keepalive_expiry=5.0,
            network_backend=_GuardedBackend(guard),
        )


# ---------------------------------------------------------------------- fetching


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """What one fetch brought back (the body is complete and within the size cap)."""

    url: str
    final_url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    fetched_at: datetime
    redirects: tuple[str, ...] = ()


def _media_type(header: str) -> tuple[str, str | None]:
    parts = [p.strip() for p in header.split(";")]
    media = parts[0].lower() if parts else ""
    charset = None
    for p in parts[1:]:
        key, _, value = p.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'")
    return media, charset


def _wrap_http_error(url: str, exc: Exception, timeout_s: float) -> WebAccessError:
    if isinstance(exc, httpx.TimeoutException):
        return WebAccessError(
            f"{url} did not answer within {timeout_s:g} s.",
            path=url,
            hint="Try again later, or raise `web.timeout_s`.",
        )
    return WebAccessError(
        f"{url} could not be fetched: {exc}.",
        path=url,
        hint="Check the address and the network connection.",
    )


def fetch(
    url: str,
    web: WebSettings,
    *,
    transport: httpx.BaseTransport | None = None,
) -> FetchedPage:
    """Download ``url`` within the settings' limits (no parsing). Raises WebAccessError."""
    start_url = normalise_url(url)
    if not web.enabled:
        raise WebAccessError(f"Web access is off, so {start_url} was not fetched.",
                             path=start_url, hint=ENABLE_HINT)  # fmt: skip
    own = transport is None
    tx = transport if transport is not None else GuardedTransport(AddressGuard.from_settings(web))
    timeout = httpx.Timeout(web.timeout_s)
    deadline = time.monotonic() + web.timeout_s
    current = start_url
    hops: list[str] = []
    try:
        while True:
            request = httpx.Request(
                "GET",
                current,
                headers={
                    "User-Agent": USER_AGENT,
                    "Accept": "text/html,application/xhtml+xml,application/pdf;q=0.9,"
                    "text/plain;q=0.8,*/*;q=0.1",
                    "Accept-Encoding": "gzip, deflate",
                },
                extensions={"timeout": timeout.as_dict()},
            )
            try:
                response = tx.handle_request(request)
            except WebAccessError:
                raise
            except httpx.HTTPError as exc:
                raise _wrap_http_error(current, exc, web.timeout_s) from exc
            response.request = request
            try:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    if len(hops) >= web.max_redirects:
                        raise WebAccessError(
                            f"{start_url} redirected more than {web.max_redirects} times.",
                            path=start_url,
                            hint="Open the final address yourself, or raise `web.max_redirects`.",
                        )
                    target = request.url.join(response.headers["location"])
                    nxt = normalise_url(str(target))  # a redirect to file:// etc. stops here
                    logger.info("redirect %s -> %s", current, nxt)
                    hops.append(current)
                    current = nxt
                    continue
                if response.status_code >= 400:
                    raise WebAccessError(
                        f"{current} answered {response.status_code} "
                        f"{response.reason_phrase or ''}".rstrip()
                        + ".",
                        path=start_url,
                        hint="Check the address; the page may have moved or need a login.",
                    )
                media, charset = _media_type(response.headers.get("content-type", ""))
                _check_type(current, media)
                body = read_capped(response, current, web, deadline)
            finally:
                response.close()
            return FetchedPage(
                url=start_url,
                final_url=current,
                status=response.status_code,
                content_type=media,
                charset=charset,
                body=body,
                fetched_at=datetime.now(UTC),
                redirects=tuple(hops),
            )
    finally:
        if own:
            tx.close()


def _check_type(url: str, media: str) -> None:
    known = _HTML_TYPES | _TEXT_TYPES | _PDF_TYPES | _SNIFF_TYPES
    if media not in known:
        raise WebAccessError(
            f"{url} serves {media}, which Sourcebook cannot read.",
            path=url,
            hint="Sourcebook reads web pages (HTML), PDFs and plain text.",
        )


def read_capped(response: httpx.Response, url: str, web: WebSettings, deadline: float) -> bytes:
    """The response body, refused past ``web.max_bytes`` or after ``deadline`` (monotonic)."""
    too_big = WebAccessError(
        f"{url} is larger than the {web.max_bytes:,}-byte limit; it was not added.",
        path=url,
        hint="Raise `web.max_bytes` if you need this page.",
    )
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > web.max_bytes:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > web.max_bytes:
                raise too_big
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise WebAccessError(
                    f"{url} took longer than {web.timeout_s:g} s to download.",
                    path=url,
                    hint="Try again later, or raise `web.timeout_s`.",
                )
    except httpx.HTTPError as exc:
        raise _wrap_http_error(url, exc, web.timeout_s) from exc
    return b"".join(chunks)


# ---------------------------------------------------------------------- page -> document


def _sniff(page: FetchedPage) -> str:
    """``pdf``, ``html`` or ``text`` from the served type, or from the bytes when the server
    did not say (or said ``application/octet-stream``)."""
    if page.content_type in _PDF_TYPES:
        return "pdf"
    if page.content_type in _HTML_TYPES:
        return "html"
    if page.content_type in _TEXT_TYPES:
        return "text"
    head = page.body[:1024].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "pdf"
    if head.startswith((b"<!doctype html", b"<html")):
        return "html"
    shown = page.content_type or "no content type"
    raise WebAccessError(
        f"{page.final_url} serves {shown} that is neither a PDF nor a web page.",
        path=page.url,
        hint="Sourcebook reads web pages (HTML), PDFs and plain text.",
    )


def _decode(page: FetchedPage) -> DecodedText:
    charset = page.charset
    if charset is None and page.body[:3] != b"\xef\xbb\xbf":
        m = re.search(rb"<meta[^>]+charset=[\"']?([A-Za-z0-9_\-]+)", page.body[:4096], re.I)
        charset = m.group(1).decode("ascii") if m else None
    if charset:
        try:
            return DecodedText(page.body.decode(charset, errors="replace").replace("\r\n", "\n"))
        except LookupError:
            pass
    return decode_text(page.body, path=Path(_name_of(page.final_url)))


def _name_of(url: str) -> str:
    u = httpx.URL(url)
    name = PurePosixPath(unquote(u.path)).name
    return name or u.host


def _store(store_dir: Path, page: FetchedPage, sha: str, ext: str) -> Path:
    """Keep the bytes and a provenance record; content-addressed, so re-storing is a no-op."""
    store_dir.mkdir(parents=True, exist_ok=True)
    target = store_dir / f"{sha}.{ext}"
    if not target.exists():
        tmp = target.with_suffix(f".{ext}.part")
        tmp.write_bytes(page.body)
        tmp.replace(target)
    record = {
        "url": page.url,
        "final_url": page.final_url,
        "redirects": list(page.redirects),
        "fetched_at": page.fetched_at.isoformat(),
        "status": page.status,
        "content_type": page.content_type,
        "charset": page.charset,
        "sha256": sha,
        "bytes": len(page.body),
        "file": target.name,
    }
    meta = store_dir / f"{sha}.json"
    tmp_meta = meta.with_suffix(".json.part")
    tmp_meta.write_text(json.dumps(record, indent=2), encoding="utf-8")
    tmp_meta.replace(meta)
    return target


def stored_copy(store_dir: Path, content_sha256: str) -> Path | None:
    """The kept bytes of a fetched document (for a viewer or an export), if present."""
    for ext in ("pdf", "html", "txt"):
        p = store_dir / f"{content_sha256}.{ext}"
        if p.exists():
            return p
    return None


def document_from_page(
    page: FetchedPage,
    settings: Settings,
    *,
    count_tokens: TokenCounter,
    store_dir: Path | None = None,
    ocr_progress: OcrProgress | None = None,
) -> IngestedDocument:
    """Turn fetched bytes into a library document (and keep the bytes under ``store_dir``)."""
    if not page.body:
        raise WebAccessError(f"{page.final_url} returned an empty page.", path=page.url)
    kind = _sniff(page)
    sha = sha256_bytes(page.body)
    name = _name_of(page.final_url)
    pages = []
    problems: list[str] = []
    title: str | None
    if kind == "pdf":
        try:
            pdf = read_pdf(
                page.body,
                path=Path(name),
                max_pages=settings.ingest.max_pages,
                ocr_settings=settings.ingest,
                ocr_progress=ocr_progress,
            )
        except IngestError as exc:
            exc.path = page.url
            raise
        blocks, pages, problems, title = pdf.blocks, pdf.pages, pdf.problems, pdf.title
    else:
        try:
            decoded = _decode(page)
        except IngestError as exc:
            exc.path = page.url
            raise
        text = decoded.text
        if decoded.note:
            problems.append(decoded.note)
        content: TextContent = read_web_html(text) if kind == "html" else read_plain(text)
        blocks, title = content.blocks, content.title
        if not any(b.text.strip() for b in blocks):
            raise WebAccessError(
                f"{page.final_url} has no readable text (it may need JavaScript to show it).",
                path=page.url,
                hint="Sourcebook never runs page scripts; save the page as PDF and add the file.",
            )
    doc = _assemble(
        blocks=blocks,
        sha=sha,
        kind="pdf" if kind == "pdf" else "web",
        source_key=f"url:{page.url}",
        source_uri=page.final_url,
        title=title or f"{httpx.URL(page.final_url).host}{httpx.URL(page.final_url).path}",
        pages=pages,
        problems=problems,
        byte_size=len(page.body),
        settings=settings.ingest,
        count_tokens=count_tokens,
    )
    doc.document.added_at = page.fetched_at
    if kind == "pdf" and not doc.passages and not problems:
        doc.document.problems.append("no text found in the document")
    if store_dir is not None:
        _store(store_dir, page, sha, {"pdf": "pdf", "html": "html"}.get(kind, "txt"))
    return doc


def fetch_url(
    url: str,
    settings: Settings,
    *,
    count_tokens: TokenCounter,
    store_dir: Path | None = None,
    ocr_progress: OcrProgress | None = None,
    transport: httpx.BaseTransport | None = None,
) -> IngestedDocument:
    """Fetch ``url`` and return it as a document ready for the library (see the module
    docstring for every rule). ``store_dir`` (normally ``<library>/web``) keeps the fetched
    bytes; ``transport`` replaces the guarded one (tests). Raises WebAccessError (or another
    IngestError for a bad PDF); never returns a partial document. Thread-safe."""
    page = fetch(url, settings.web, transport=transport)
    logger.info(
        "fetched %s (%s, %d bytes%s)", page.final_url, page.content_type or "?", len(page.body),
        f", via {len(page.redirects)} redirect(s)" if page.redirects else "",
    )  # fmt: skip
    return document_from_page(
        page, settings, count_tokens=count_tokens, store_dir=store_dir, ocr_progress=ocr_progress
    )

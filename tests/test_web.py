"""Web pages: real HTTP against a server on 127.0.0.1 (allowed for its own host:port only),
the SSRF refusals, the caps, and proof that nothing touches the network with the web off."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from core.errors import WebAccessError
from core.ingest.web import (
    AddressGuard,
    fetch,
    fetch_url,
    looks_like_url,
    normalise_url,
    refusal_reason,
    stored_copy,
)
from core.settings import Settings, WebSettings

PAGE = b"""<!doctype html><html><head><title>Harbour report | Example News</title>
<script>document.write("INJECTED SCRIPT TEXT")</script><style>p { color: red }</style></head>
<body><header><h1>Example News</h1><nav><a href="/">Home</a> <a href="/x">World</a></nav></header>
<main><article><h1>Harbour traffic rose in 2023</h1>
<p>Container traffic at the Port of Rotterdam rose by 4.2 percent in 2023.</p>
<aside>Related: ten other ports</aside>
<h2>Why it matters</h2><p>Shipping volumes are a leading indicator of trade.</p>
<form><input name="q"> Subscribe to our newsletter</form></article></main>
<footer>Copyright Example News. Cookie settings.</footer></body></html>"""


def _pdf_bytes(text: str) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 100), text, fontsize=12)
    data: bytes = doc.tobytes()
    doc.close()
    return data


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        srv = self.server
        srv.hits.append(self.path)
        srv.headers_seen.append(dict(self.headers))
        port = srv.server_address[1]
        p = self.path
        if p == "/page.html":
            self._send(200, PAGE, "text/html; charset=utf-8", Set_Cookie="session=abc; Path=/")
        elif p == "/doc.pdf":
            self._send(200, _pdf_bytes("The tariff schedule changed on 1 March 2024."),
                       "application/pdf")  # fmt: skip
        elif p == "/octet.pdf":
            self._send(200, _pdf_bytes("Served without a proper type."),
                       "application/octet-stream")  # fmt: skip
        elif p == "/blob":
            self._send(200, b"\x00\x01\x02 binary data", "application/octet-stream")
        elif p == "/image.png":
            self._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")
        elif p.startswith("/hop"):
            n = int(p[4:])
            target = "/page.html" if n == 0 else f"/hop{n - 1}"
            self._send(302, b"", "text/plain", Location=target)
        elif p == "/to-loopback":
            self._send(302, b"", "text/plain", Location=f"http://127.0.0.2:{port}/page.html")
        elif p == "/to-metadata":
            self._send(302, b"", "text/plain", Location="http://169.254.169.254/latest/meta-data/")
        elif p == "/to-file":
            self._send(302, b"", "text/plain", Location="file:///etc/passwd")
        elif p == "/slow":
            time.sleep(3)
            self._send(200, PAGE, "text/html")
        elif p == "/drip":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(40):
                    self.wfile.write(b"<p>drip</p>" + b" " * 100)
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
        elif p == "/huge-declared":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(50_000_000))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(b"<p>" + b"x" * 65536)
        elif p == "/huge-stream":  # no length: the body ends when the connection closes
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Connection", "close")
            self.end_headers()
            sent = 0
            try:
                for _ in range(200):  # up to 12.8 MB
                    self.wfile.write(b"<p>" + b"y" * 65533)
                    sent += 65536
            except OSError:
                pass
            srv.stream_sent = sent
            self.close_connection = True
        elif p == "/changing":
            srv.version += 1
            body = f"<html><body><main><p>Version {srv.version} of the changing page says the rate is {srv.version}.0 percent.</p></main></body></html>"  # noqa: E501
            self._send(200, body.encode(), "text/html")
        elif p == "/stable":
            self._send(200, b"<html><body><p>Stable text about lighthouses.</p></body></html>",
                       "text/html")  # fmt: skip
        else:
            self._send(404, b"not found", "text/plain")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hits: list[str] = []
        self.headers_seen: list[dict[str, str]] = []
        self.version = 0
        self.stream_sent = 0


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    srv = _Server()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _base(srv: _Server) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def _web(srv: _Server, **kw: Any) -> WebSettings:
    """Web on, local hosts refused except exactly this server's host:port."""
    opts: dict[str, Any] = {
        "enabled": True,
        "local_allowlist": [f"127.0.0.1:{srv.server_address[1]}"],
        "timeout_s": 5.0,
    }
    opts.update(kw)
    return WebSettings(**opts)


def _count(texts: Any) -> list[int]:
    return [len(t.split()) + 2 for t in texts]


# ------------------------------------------------------------------------------ fetching


def test_html_page_main_content(server: _Server, tmp_path: Path) -> None:
    settings = Settings(web=_web(server))
    doc = fetch_url(f"{_base(server)}/page.html#top", settings, count_tokens=_count,
                    store_dir=tmp_path / "web")  # fmt: skip
    d = doc.document
    assert d.kind == "web"
    assert d.source_key == f"url:{_base(server)}/page.html"  # normalised: no fragment
    assert d.source_uri == f"{_base(server)}/page.html"
    assert d.title == "Harbour report | Example News"
    assert "Port of Rotterdam rose by 4.2 percent" in doc.text
    assert "Why it matters" in doc.text  # headings kept
    for gone in ("INJECTED", "Home", "Related: ten", "Subscribe", "Copyright", "color"):
        assert gone not in doc.text, gone
    assert any(p.heading_path and "Why it matters" in p.heading_path for p in doc.passages)
    # the bytes and the fetch record are kept, named by content hash
    kept = stored_copy(tmp_path / "web", d.content_sha256)
    assert kept is not None and kept.suffix == ".html" and kept.read_bytes() == PAGE
    meta = (tmp_path / "web" / f"{d.content_sha256}.json").read_text()
    assert '"fetched_at"' in meta and "page.html" in meta
    # no cookies sent back, a clear user agent
    h = server.headers_seen[-1]
    assert "Cookie" not in h and h["User-Agent"].startswith("Sourcebook/")


def test_pdf_url_goes_through_pdf_reader(server: _Server, tmp_path: Path) -> None:
    settings = Settings(web=_web(server))
    doc = fetch_url(f"{_base(server)}/doc.pdf", settings, count_tokens=_count,
                    store_dir=tmp_path)  # fmt: skip
    assert doc.document.kind == "pdf" and doc.document.page_count == 1
    assert "tariff schedule changed" in doc.text
    assert doc.passages[0].words and doc.passages[0].page_start == 0  # boxes for highlights
    assert (tmp_path / f"{doc.document.content_sha256}.pdf").exists()
    # a PDF served as application/octet-stream is recognised by its bytes
    doc2 = fetch_url(f"{_base(server)}/octet.pdf", settings, count_tokens=_count)
    assert doc2.document.kind == "pdf" and "proper type" in doc2.text


def test_redirect_chain_followed_and_limited(server: _Server) -> None:
    page = fetch(f"{_base(server)}/hop2", _web(server, max_redirects=3))  # 3 hops
    assert page.final_url.endswith("/page.html") and len(page.redirects) == 3
    with pytest.raises(WebAccessError, match="redirected more than 2 times"):
        fetch(f"{_base(server)}/hop2", _web(server, max_redirects=2))


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("/blob", "neither a PDF nor a web page"),
        ("/image.png", "serves image/png"),
        ("/missing", "answered 404"),
    ],
)
def test_wrong_content_refused(server: _Server, path: str, pattern: str) -> None:
    with pytest.raises(WebAccessError, match=pattern) as info:
        fetch_url(f"{_base(server)}{path}", Settings(web=_web(server)), count_tokens=_count)
    assert info.value.hint


def test_slow_response_times_out(server: _Server) -> None:
    t0 = time.monotonic()
    with pytest.raises(WebAccessError, match=r"did not answer within 0\.5 s"):
        fetch(f"{_base(server)}/slow", _web(server, timeout_s=0.5))
    assert time.monotonic() - t0 < 2.5


def test_dripping_response_hits_total_deadline(server: _Server) -> None:
    t0 = time.monotonic()
    with pytest.raises(WebAccessError, match="took longer than 1 s"):
        fetch(f"{_base(server)}/drip", _web(server, timeout_s=1.0))
    assert time.monotonic() - t0 < 3.0


def test_huge_responses_capped(server: _Server) -> None:
    with pytest.raises(WebAccessError, match="larger than the 1,000,000-byte limit"):
        fetch(f"{_base(server)}/huge-declared", _web(server, max_bytes=1_000_000))
    with pytest.raises(WebAccessError, match="larger than the 1,000,000-byte limit"):
        fetch(f"{_base(server)}/huge-stream", _web(server, max_bytes=1_000_000))
    time.sleep(0.3)
    # reading stopped past the cap: the server could not push its whole 12.8 MB
    assert server.stream_sent < 12_800_000


# ------------------------------------------------------------------------------ SSRF


@pytest.mark.parametrize(
    ("url", "pattern"),
    [
        ("file:///etc/passwd", "Only http:// and https://"),
        ("ftp://example.com/x", "Only http:// and https://"),
        ("http://user:pw@example.com/", "user name or password"),
        ("http://localhost/", "loopback"),
        ("http://127.0.0.2/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://10.1.2.3/", "private"),
        ("http://192.168.1.1/admin", "private"),
        ("http://[::1]/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://100.100.100.200/", "metadata"),
    ],
)
def test_ssrf_refusals(server: _Server, url: str, pattern: str) -> None:
    # the test server is allowed; nothing else local is
    with pytest.raises(WebAccessError, match=pattern):
        fetch(url, _web(server, timeout_s=2.0))


def test_allowlist_is_exact(server: _Server) -> None:
    port = server.server_address[1]
    with pytest.raises(WebAccessError, match="loopback"):
        fetch(f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}/", _web(server))
    # allow_local_hosts lifts the rule entirely (here: the same server by another name)
    page = fetch(f"http://localhost:{port}/page.html", _web(server, local_allowlist=[],
                                                             allow_local_hosts=True))  # fmt: skip
    assert page.status == 200


@pytest.mark.parametrize(
    ("path", "pattern"),
    [("/to-loopback", "127.0.0.2.*loopback"), ("/to-metadata", "metadata"),
     ("/to-file", "Only http")],
)  # fmt: skip
def test_redirect_to_forbidden_target_refused(server: _Server, path: str, pattern: str) -> None:
    with pytest.raises(WebAccessError, match=pattern):
        fetch(f"{_base(server)}{path}", _web(server))


def test_hostname_resolving_to_private_ip_refused(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.getaddrinfo

    def fake(host: str, port: Any, *a: Any, **kw: Any) -> Any:
        if host == "intranet.example.com":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]
        if host == "mixed.example.com":  # one public and one private address: refused
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("8.8.8.8", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.168.0.10", port)),
            ]
        return real(host, port, *a, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    with pytest.raises(WebAccessError, match=r"10\.0\.0\.7, a private"):
        fetch("http://intranet.example.com/", _web(server))
    with pytest.raises(WebAccessError, match=r"192\.168\.0\.10"):
        fetch("https://mixed.example.com/", _web(server))


def test_connection_pinned_to_checked_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: the name is resolved once, and the socket connects to that address."""
    lookups: list[str] = []
    connects: list[Any] = []

    def fake_getaddrinfo(host: str, port: Any, *a: Any, **kw: Any) -> Any:
        lookups.append(host)
        ip = "8.8.4.4" if len(lookups) == 1 else "127.0.0.1"  # a rebinding DNS server
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    def fake_connect(address: Any, *a: Any, **kw: Any) -> Any:
        connects.append(address)
        raise OSError("no network in tests")

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    monkeypatch.setattr(socket, "create_connection", fake_connect)
    with pytest.raises(WebAccessError, match="could not be fetched"):
        fetch("http://rebind.example.org/", WebSettings(enabled=True, timeout_s=2.0))
    assert lookups == ["rebind.example.org"]
    assert connects == [("8.8.4.4", 80)]


def test_guard_rules() -> None:
    import ipaddress

    assert refusal_reason(ipaddress.ip_address("93.184.216.34")) is None
    assert refusal_reason(ipaddress.ip_address("2606:4700::1111")) is None
    for bad in ("127.0.0.1", "10.0.0.1", "172.16.5.4", "100.64.1.1", "224.0.0.1", "240.0.0.1",
                "169.254.1.1", "::", "fe80::1", "ff02::1", "2002:7f00:1::1", "64:ff9b::a00:1",
                "168.63.129.16"):  # fmt: skip
        assert refusal_reason(ipaddress.ip_address(bad)) is not None, bad
    g = AddressGuard.from_settings(WebSettings(local_allowlist=["127.0.0.1:8080", "[::1]:9000"]))
    assert g.allowlist == frozenset({("127.0.0.1", 8080), ("::1", 9000)})
    assert [str(ip) for ip in g.resolve("127.0.0.1", 8080)] == ["127.0.0.1"]
    with pytest.raises(WebAccessError):
        g.resolve("127.0.0.1", 8081)


def test_url_helpers() -> None:
    assert looks_like_url("https://example.com/a") and looks_like_url(" HTTP://x.y ")
    assert not looks_like_url("report.pdf") and not looks_like_url("C:\\docs\\a.pdf")
    assert normalise_url("HTTPS://Example.COM:443/a?b=1#frag") == "https://example.com/a?b=1"
    assert normalise_url("http://example.com") == "http://example.com/"


# ------------------------------------------------------------------------------ offline


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail the test if anything looks a name up or opens a connection."""
    calls: list[str] = []

    def forbid(name: str) -> Any:
        def _f(*a: Any, **kw: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"network used with the web off: {name}{a}")

        return _f

    monkeypatch.setattr(socket, "getaddrinfo", forbid("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", forbid("create_connection"))
    monkeypatch.setattr(socket.socket, "connect", forbid("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", forbid("socket.connect_ex"))
    return calls


def test_web_off_opens_no_connection(no_network: list[str]) -> None:
    with pytest.raises(WebAccessError) as info:
        fetch_url("https://example.com/report", Settings(), count_tokens=_count)
    assert "web.enabled" in str(info.value) and "SOURCEBOOK_WEB__ENABLED=1" in info.value.hint
    assert no_network == []


def test_add_url_with_web_off_through_the_service(app: Any, no_network: list[str]) -> None:
    changes = app.add(["https://example.com/report"])
    [r] = changes.results
    assert r.outcome == "failed" and "Web access is off" in r.error
    assert "web.enabled" in r.hint
    assert no_network == []


def test_cli_keeps_urls_intact() -> None:
    from core.cli import build_parser

    args = build_parser().parse_args(["add", "https://example.com/a/b", "notes.md"])
    assert args.paths == ["https://example.com/a/b", Path("notes.md")]


# ------------------------------------------------------------------------------ library


def test_url_versions_in_the_library(server: _Server, tmp_path: Path, embedder: Any) -> None:
    from core.service import Sourcebook

    home = tmp_path / "home"
    app = Sourcebook(home, settings=Settings(web=_web(server)), embedder=embedder)
    try:
        url = f"{_base(server)}/changing"
        first = app.add([url]).results[0]
        assert first.outcome == "added", first
        second = app.add([url]).results[0]
        assert second.outcome == "new_version" and second.superseded == first.doc_id
        stable = f"{_base(server)}/stable"
        assert app.add([stable]).results[0].outcome == "added"
        assert app.add([stable]).results[0].outcome == "unchanged"
        hits = app.search("rate percent changing page", mode="keyword")
        assert hits and hits[0].doc_id == second.doc_id
        ev = app.evidence(hits[0].evidence_id)
        assert ev.kind == "web" and ev.source_uri == url and "Version 2" in ev.text
        assert len(list((app.library_path / "web").glob("*.html"))) == 3
    finally:
        app.close()

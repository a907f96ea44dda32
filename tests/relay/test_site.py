"""The static site the relay's port serves: headers, CSP, revalidation, gzip, what is not served."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from bridge.relay.site import (
    HttpAnswer,
    StaticSite,
    accepts_gzip,
    content_security_policy,
    content_type_of,
)
from bridge.webclient import NOT_BUILT, load_files

INDEX = b"<!doctype html><title>CodeDeck</title><script type=module src=/app.js></script>"
APP = b"console.log('codedeck');\n" * 400  # compressible
ICON = bytes(range(256))  # incompressible
FILES = {
    "/index.html": INDEX,
    "/app.js": APP,
    "/app.css": b"body{margin:0}\n" * 50,
    "/sw.js": b"self.addEventListener('push',()=>{});\n",
    "/manifest.webmanifest": b'{"name":"CodeDeck"}',
    "/icons/icon-192.png": ICON,
}
RELAYS = ["ws://192.168.1.20:7777", "ws://127.0.0.1:7777", "wss://relay.example.org"]

EXPECTED_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self' ws://192.168.1.20:7777 ws://127.0.0.1:7777 wss://relay.example.org; "
    "manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


@pytest.fixture
def site() -> StaticSite:
    return StaticSite(FILES, connect=RELAYS, missing=NOT_BUILT)


def get(site: StaticSite, path: str, **headers: str) -> HttpAnswer:
    return site.answer("GET", path, {k.replace("_", "-"): v for k, v in headers.items()})


def assert_security_headers(answer: HttpAnswer) -> None:
    assert answer.header("Content-Security-Policy") == EXPECTED_CSP
    assert answer.header("X-Content-Type-Options") == "nosniff"
    assert answer.header("Referrer-Policy") == "no-referrer"
    assert answer.header("Cross-Origin-Opener-Policy") == "same-origin"


def test_root_is_the_index_with_every_header(site: StaticSite) -> None:
    answer = get(site, "/")
    assert answer.status == 200
    assert answer.body == INDEX
    assert_security_headers(answer)
    assert answer.header("Content-Type") == "text/html; charset=utf-8"
    assert answer.header("Cache-Control") == "no-cache"
    assert answer.header("Content-Length") == str(len(INDEX))
    etag = answer.header("ETag")
    assert etag is not None and etag.startswith('"') and etag.endswith('"')
    assert get(site, "/index.html").body == INDEX
    assert get(site, "/?v=2").body == INDEX  # a query string names the same file


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/app.css", "text/css; charset=utf-8"),
        ("/sw.js", "text/javascript; charset=utf-8"),
        ("/manifest.webmanifest", "application/manifest+json"),
        ("/icons/icon-192.png", "image/png"),
    ],
)
def test_each_file_has_its_content_type_and_the_security_headers(
    site: StaticSite, path: str, content_type: str
) -> None:
    answer = get(site, path)
    assert (answer.status, answer.body) == (200, FILES[path])
    assert answer.header("Content-Type") == content_type
    assert_security_headers(answer)


def test_content_types_by_extension() -> None:
    assert content_type_of("/a.svg") == "image/svg+xml"
    assert content_type_of("/a.JSON") == "application/json"
    assert content_type_of("/LICENSE") == "application/octet-stream"
    assert content_type_of("/a.unknown") == "application/octet-stream"


def test_a_matching_etag_gets_304_and_a_stale_one_the_file(site: StaticSite) -> None:
    etag = get(site, "/app.js").header("ETag")
    assert etag is not None
    same = get(site, "/app.js", if_none_match=etag)
    assert (same.status, same.body) == (304, b"")
    assert same.header("ETag") == etag
    assert same.header("Cache-Control") == "no-cache"
    assert_security_headers(same)
    assert get(site, "/app.js", if_none_match=f'"stale", W/{etag}').status == 304
    assert get(site, "/app.js", if_none_match="*").status == 304
    stale = get(site, "/app.js", if_none_match='"0123"')
    assert (stale.status, stale.body) == (200, APP)


def test_gzip_when_the_client_takes_it_with_its_own_etag(site: StaticSite) -> None:
    packed = get(site, "/app.js", accept_encoding="gzip, deflate, br")
    assert packed.header("Content-Encoding") == "gzip"
    assert packed.header("Vary") == "Accept-Encoding"
    assert gzip.decompress(packed.body) == APP
    assert len(packed.body) < len(APP) // 10
    assert packed.header("Content-Length") == str(len(packed.body))
    plain = get(site, "/app.js")
    assert plain.header("Content-Encoding") is None
    assert plain.header("Vary") == "Accept-Encoding"
    assert plain.header("ETag") != packed.header("ETag")  # two representations, two tags
    # the gzip form's tag revalidates the gzip form
    again = get(site, "/app.js", accept_encoding="gzip", if_none_match=packed.header("ETag") or "")
    assert again.status == 304
    # refused gzip, and an incompressible file, go plain
    assert get(site, "/app.js", accept_encoding="gzip;q=0").body == APP
    icon = get(site, "/icons/icon-192.png", accept_encoding="gzip")
    assert (icon.body, icon.header("Content-Encoding"), icon.header("Vary")) == (ICON, None, None)


def test_the_gzip_form_is_computed_once_when_the_site_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    site = StaticSite(FILES)
    monkeypatch.setattr(gzip, "compress", lambda *a, **k: pytest.fail("compressed per request"))
    for _ in range(3):
        assert gzip.decompress(get(site, "/app.js", accept_encoding="gzip").body) == APP


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("gzip", True),
        ("GZIP", True),
        ("deflate, gzip;q=0.5", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0", False),
        ("*", True),
        ("*;q=0", False),
        ("br, *", True),
        ("*, gzip;q=0", False),
        ("identity", False),
        ("", False),
        ("gzip;q=nonsense", False),
    ],
)
def test_accept_encoding(value: str, allowed: bool) -> None:
    assert accepts_gzip(value) is allowed


def test_head_has_the_headers_and_no_body(site: StaticSite) -> None:
    head = site.answer("HEAD", "/app.js", {})
    get_answer = get(site, "/app.js")
    assert head.status == 200
    assert head.body == b""
    assert head.headers == get_answer.headers  # Content-Length included: the GET's length
    missing = site.answer("HEAD", "/nope", {})
    assert (missing.status, missing.body) == (404, b"")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "get"])
def test_other_methods_are_refused(site: StaticSite, method: str) -> None:
    answer = site.answer(method, "/", {})
    assert answer.status == 405
    assert answer.header("Allow") == "GET, HEAD"
    assert_security_headers(answer)


@pytest.mark.parametrize(
    "path",
    [
        "/nope.js",
        "/../bridge/config.py",
        "/icons/../index.html",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/..%2fpyproject.toml",
        "//etc/passwd",
        "/icons",
        "/icons/",
        "/app.js/",
        "/APP.JS",
        "/.git/config",
        "app.js",
        "*",
        "/index.html%00",
        "/\\..\\index.html",
    ],
)
def test_only_the_listed_files_are_served(site: StaticSite, path: str) -> None:
    answer = get(site, path)
    assert answer.status == 404
    assert answer.body == b"Not found.\n"
    assert_security_headers(answer)


def test_a_site_refuses_paths_that_are_not_site_paths() -> None:
    for bad in ("app.js", "/a/../b", "/a\\b"):
        with pytest.raises(ValueError, match="not a site path"):
            StaticSite({bad: b""})


def test_an_unbuilt_site_says_how_to_build_it() -> None:
    site = StaticSite({}, missing=NOT_BUILT)
    answer = get(site, "/")
    assert answer.status == 200
    assert answer.header("Content-Type") == "text/plain; charset=utf-8"
    assert b"npm run build" in answer.body and b"not built" in answer.body
    assert get(site, "/app.js").status == 404


def test_csp_leaves_out_urls_that_could_break_out_of_the_directive() -> None:
    policy = content_security_policy(
        [
            "wss://ok.example/nostr",
            "wss://evil.example; script-src *",
            "wss://evil.example,x",
            "wss://evil.example/'unsafe-inline'",
            "wss://bücher.example",
            "javascript://x",
            "wss://ok.example/nostr",  # once
            "wss://relay.example/?q=1",  # the query is not part of a source
        ]
    )
    assert "connect-src 'self' wss://ok.example/nostr wss://relay.example/;" in policy
    assert policy.count(";") == 9  # ten directives, none injected


def test_the_connect_sources_can_be_set_once_the_port_is_known() -> None:
    site = StaticSite(FILES)
    assert "connect-src 'self';" in (get(site, "/").header("Content-Security-Policy") or "")
    site.connect_to(["ws://127.0.0.1:4242"])
    assert "connect-src 'self' ws://127.0.0.1:4242;" in (
        get(site, "/").header("Content-Security-Policy") or ""
    )


def test_load_files_lists_regular_files_by_site_path(tmp_path: Path) -> None:
    static = tmp_path / "static"
    (static / "icons").mkdir(parents=True)
    (static / "index.html").write_bytes(INDEX)
    (static / "icons" / "a.png").write_bytes(ICON)
    (static / ".hidden").write_bytes(b"x")
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"secret")
    (static / "link.txt").symlink_to(outside)
    (static / "linked").symlink_to(tmp_path, target_is_directory=True)
    assert load_files(static) == {"/icons/a.png": ICON, "/index.html": INDEX}
    assert load_files(tmp_path / "missing") == {}

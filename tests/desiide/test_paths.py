"""The workspace-path rule: what passes (and its one spelling), what is refused and why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bridge.desiide.paths import (
    MAX_PATH_CHARS,
    check_relative_path,
    normalize_workspace_root,
    resolve_in_root,
)

VALID = [
    ("a.txt", "a.txt"),
    ("src/app.py", "src/app.py"),
    ("./src//app.py", "src/app.py"),
    ("src/./app.py/", "src/app.py"),
    ("dir/", "dir"),
    (".env", ".env"),
    ("a/.../b", "a/.../b"),  # "..." is a name, not a parent reference
    ("a/..b", "a/..b"),
    ("~x", "~x"),
    ("a/~", "a/~"),
    ("spaces in name.md", "spaces in name.md"),
    ("ünïcode/файл", "ünïcode/файл"),
    ("x" * MAX_PATH_CHARS, "x" * MAX_PATH_CHARS),
]

INVALID = [
    ("", "must not be empty"),
    ("/etc/passwd", "not absolute"),
    ("//server/share", "not absolute"),
    ("C:/Windows", "not absolute"),
    ("c:relative", "not absolute"),
    ("..", "'..' segments"),
    ("../x", "'..' segments"),
    ("a/../b", "'..' segments"),
    ("a/b/..", "'..' segments"),
    ("a\\b", "backslashes"),
    ("..\\x", "backslashes"),
    ("a\x00b", "control characters"),
    ("a\nb", "control characters"),
    ("a\tb", "control characters"),
    ("a\x7fb", "control characters"),
    ("~/x", "must not start with '~'"),
    ("~", "must not start with '~'"),
    (".", "not its root"),
    ("./", "not its root"),
    ("//", "not absolute"),
    ("x" * (MAX_PATH_CHARS + 1), f"at most {MAX_PATH_CHARS}"),
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[c[0][:20] for c in VALID])
def test_valid_paths_get_one_spelling(text: str, expected: str) -> None:
    assert check_relative_path(text) == expected


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[repr(c[0][:20]) for c in INVALID])
def test_invalid_paths_are_refused_with_the_rule(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        check_relative_path(text)
    if len(text) > 3:
        assert text not in str(caught.value)  # the message names the rule, not the path


@pytest.mark.parametrize("text", [".", "./", ".//./"])
def test_the_root_only_where_asked_for(text: str) -> None:
    assert check_relative_path(text, allow_root=True) == "."


def test_allow_root_does_not_relax_anything_else() -> None:
    with pytest.raises(ValueError, match=r"'\.\.'"):
        check_relative_path("..", allow_root=True)


# --- resolve_in_root ------------------------------------------------------------------------------


def make_tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    os.symlink(outside, root / "escape")
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(root / "src", root / "inner")
    os.symlink(tmp_path / "nowhere" / "x", root / "dangling")
    return root


def test_a_plain_file_resolves_inside(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    assert resolve_in_root(root, "src/a.py") == (root / "src" / "a.py").resolve()


def test_a_new_file_resolves_inside(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    assert resolve_in_root(root, "src/new/b.py") == root.resolve() / "src" / "new" / "b.py"


def test_the_root_itself(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    assert resolve_in_root(root, ".") == root.resolve()


def test_a_symlink_that_stays_inside_is_fine(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    assert resolve_in_root(root, "inner/a.py") == (root / "src" / "a.py").resolve()


@pytest.mark.parametrize("rel", ["escape/secret.txt", "leak.txt", "escape/new.txt", "dangling"])
def test_symlinks_out_of_the_root_are_refused(tmp_path: Path, rel: str) -> None:
    root = make_tree(tmp_path)
    with pytest.raises(ValueError, match="outside the workspace"):
        resolve_in_root(root, rel)


def test_a_root_reached_through_a_symlink_still_works(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    alias = tmp_path / "alias"
    os.symlink(root, alias)
    assert resolve_in_root(alias, "src/a.py") == (root / "src" / "a.py").resolve()


def test_the_text_rule_applies_first(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    with pytest.raises(ValueError, match="not absolute"):
        resolve_in_root(root, str(root / "src" / "a.py"))


def test_a_missing_root_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        resolve_in_root(tmp_path / "missing", "a")


# --- normalize_workspace_root --------------------------------------------------------------------

ROOTS = [
    ("/home/me/project", "/home/me/project"),
    ("/home/me/project/", "/home/me/project"),
    ("//home//me/./p/../q", "/home/me/q"),
    ("file:///home/me/My%20Project", "/home/me/My Project"),
    ("file://localhost/home/me/p", "/home/me/p"),
    ("FILE:///srv/x", "/srv/x"),
    ("/", "/"),
]

BAD_ROOTS = [
    ("relative/path", "absolute path"),
    ("", "non-empty"),
    ("file://server/share", "local file:// URI"),
    ("file:///home/x?q=1", "local file:// URI"),
    ("https://example.com/x", "absolute path or a file:// URI"),
    ("vscode-remote://ssh/x", "absolute path or a file:// URI"),
    ("file:///C:/Users/me", "Windows"),
    ("C:\\Users\\me", "Windows"),
    ("/home/a\x00b", "control characters"),
    ("file:///home/a%00b", "control characters"),
]


@pytest.mark.parametrize(("text", "expected"), ROOTS)
def test_workspace_roots_are_normalized(text: str, expected: str) -> None:
    assert normalize_workspace_root(text) == expected


@pytest.mark.parametrize(("text", "message"), BAD_ROOTS)
def test_bad_workspace_roots_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalize_workspace_root(text)

"""What the package ships of CodeDeck Web is what its sources build, and the sources type-check.

``make run`` needs only Python, so the built app (``bridge/webclient/static/``) is committed with
the package; these checks keep it honest: a rebuild from ``web/`` (its lockfile's esbuild, into a
temporary folder) must give the same files, byte for byte, and nothing more or less. A change to
the sources committed without ``npm run build`` fails here, as does a hand edit of the output.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.browser import REPO, WEB_DIR, missing_web_tools, need

STATIC = REPO / "bridge" / "webclient" / "static"
TIMEOUT = 300


def run(argv: list[str], cwd: Path = WEB_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)


def files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_the_shipped_app_is_what_the_sources_build(tmp_path: Path) -> None:
    need(missing_web_tools("esbuild", "preact", "nostr-tools", "marked"))
    out = tmp_path / "static"
    built = run(["node", str(WEB_DIR / "build.mjs"), "--out", str(out)])
    assert built.returncode == 0, built.stderr + built.stdout
    shipped, rebuilt = files(STATIC), files(out)
    assert shipped, f"nothing is shipped in {STATIC.relative_to(REPO)}"
    assert sorted(shipped) == sorted(rebuilt), (
        "the shipped file list differs from the build's: "
        f"only shipped {sorted(set(shipped) - set(rebuilt))}, "
        f"only built {sorted(set(rebuilt) - set(shipped))} (cd web && npm run build)"
    )
    differ = [name for name in shipped if shipped[name] != rebuilt[name]]
    assert not differ, f"shipped files differ from the build: {differ} (cd web && npm run build)"


def test_the_build_is_deterministic(tmp_path: Path) -> None:
    need(missing_web_tools("esbuild", "preact", "nostr-tools", "marked"))
    builds = []
    for name in ("one", "two"):
        built = run(["node", str(WEB_DIR / "build.mjs"), "--out", str(tmp_path / name)])
        assert built.returncode == 0, built.stderr + built.stdout
        builds.append(files(tmp_path / name))
    assert builds[0] == builds[1]


def test_the_sources_type_check() -> None:
    need(missing_web_tools("typescript"))
    checked = run(["node", str(WEB_DIR / "node_modules" / ".bin" / "tsc"), "--noEmit", "-p", "."])
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_front_end_unit_tests_pass() -> None:
    scripts = json.loads((WEB_DIR / "package.json").read_text()).get("scripts", {})
    assert "test" in scripts, "web/package.json has no test script (npm test)"
    need(missing_web_tools("typescript"))
    tested = run(["npm", "test", "--silent"])
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-4000:]

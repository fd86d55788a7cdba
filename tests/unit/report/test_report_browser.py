"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``, installed by
``.ci/run``) loads it with no console message and no request, renders a screenshot, and its
DOM holds every experiment and verdict.

How console errors and requests are seen: Chromium run with ``--enable-logging=stderr``
prints every console message (including Content-Security-Policy refusals, which is what
any load attempt becomes under the page's ``default-src 'none'``) as a ``:CONSOLE`` line.
A negative control page that tries to load an image and run a script proves that this
channel reports violations on this machine, so silence on the report means something.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from report_helpers import PROBLEMS, Audits, chromium

from reprobridge.report.html import render_html
from reprobridge.report.load import load_audit

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("chromium") is None,
        reason="chromium is not installed (apt-get install chromium; .ci/run does)",
    ),
]


def test_report_loads_clean_and_shows_every_experiment(audits: Audits, tmp_path: Path) -> None:
    data = load_audit(audits.second)
    page = tmp_path / "report.html"
    page.write_text(render_html(data, None))
    shot = tmp_path / "shot.png"
    got = chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600")
    assert got.returncode == 0, got.stderr[-2000:]
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    problems = [line for line in got.stderr.splitlines() if PROBLEMS.search(line)]
    assert problems == [], problems

    dom = chromium(page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<div class="verdict" id="overall">FAIL</div>' in dom.stdout
    for exp in data.experiments:
        assert f"Experiment {exp.id} " in dom.stdout
        for level in exp.levels.values():
            assert f'<span class="badge {level.status}">{level.status}</span>' in dom.stdout
    assert dom.stdout.count("<svg") >= 8  # metric plots and timelines rendered inline
    assert not [line for line in dom.stderr.splitlines() if PROBLEMS.search(line)]


def test_the_check_sees_a_page_that_loads_or_runs_something(audits: Audits, tmp_path: Path) -> None:
    html = render_html(load_audit(audits.first)).replace(
        "<main>",
        '<main><img src="http://example.invalid/x.png"><script>console.error("boom")</script>',
    )
    page = tmp_path / "bad.html"
    page.write_text(html)
    got = chromium(page, tmp_path, "--dump-dom")
    assert got.returncode == 0, got.stderr[-2000:]
    problems = [line for line in got.stderr.splitlines() if PROBLEMS.search(line)]
    assert any("example.invalid" in line for line in problems), got.stderr[-3000:]
    assert any("inline script" in line.lower() for line in problems), got.stderr[-3000:]

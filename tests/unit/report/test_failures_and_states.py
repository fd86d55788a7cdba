"""A failed run shows why (its stderr's last lines) and a non-hermetic pass is not green,
in the terminal (`rb audit`'s summary), Markdown and HTML."""

from __future__ import annotations

import dataclasses

import pytest

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.cli.audit import _print_summary
from reprobridge.report.html import render_html
from reprobridge.report.load import load_audit
from reprobridge.report.markdown import render_markdown

SECRET = "s3cr3t-" + "q7" * 12
#: A run that dies the way a missing interpreter does: exit 127, the cause only on stderr.
FAILING = (
    'echo "preparing"\n'
    f"echo 'token {SECRET}' >&2\n"
    "printf 'colour \\033[31mred\\033[0m\\n' >&2\n"
    "echo '```' >&2\n"
    "pythonnotthere train.py\n"
)


@pytest.fixture
def failed_audit(tiny_repo, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_API_TOKEN", SECRET)
    root = tiny_repo(FAILING)
    return run_audit(root, AuditOptions(runs=1, backend="host"))


def test_failed_run_shows_the_end_of_its_stderr_everywhere(failed_audit, capsys) -> None:
    assert not failed_audit.passed
    _print_summary(failed_audit)
    out = capsys.readouterr().out
    assert "run 1 failed (exit(127)); the last lines of its stderr:" in out
    assert "pythonnotthere: command not found" in out
    assert "\x1b[31m" not in out and "\\x1b[31m" in out  # no escape reaches the terminal
    audit = load_audit(failed_audit.path)
    md = render_markdown(audit)
    assert "### Failed runs" in md and "pythonnotthere: command not found" in md
    # The log's own ``` cannot close the block: the fence is longer.
    assert "````text\n" in md
    page = render_html(audit)
    assert '<div class="failure"><p><b>run 1</b> failed (exit(127))' in page
    assert "pythonnotthere: command not found" in page
    for text in (out, md, page):  # the stderr line with the key is there, redacted
        assert SECRET not in text and "token [REDACTED" in text


def test_a_passing_run_shows_no_failure_block(tiny_repo, capsys) -> None:
    result = run_audit(
        tiny_repo("echo acc=0.9\necho harmless >&2\n"), AuditOptions(runs=1, backend="host")
    )
    assert result.passed and result.summary["hermetic"] is False
    _print_summary(result)
    out = capsys.readouterr().out
    assert "the last lines of its stderr" not in out
    # The host backend is not hermetic: the pass says so, everywhere.
    assert "verdict: PASS, NOT HERMETIC" in out
    assert "environment PASS, NOT HERMETIC" in out
    audit = load_audit(result.path)
    md = render_markdown(audit)
    assert md.startswith("## 🟡 PASS, NOT HERMETIC: ")
    assert "🟡 pass, not hermetic" in md and "### Failed runs" not in md
    page = render_html(audit)
    assert '<header class="banner pass-not-hermetic">' in page
    assert '<div class="verdict" id="overall">PASS, NOT HERMETIC</div>' in page
    assert '<span class="badge pass-not-hermetic">pass, not hermetic</span>' in page
    assert '<div class="failure">' not in page
    # The same audit, had it been hermetic: a green pass.
    hermetic = dataclasses.replace(audit, summary=dataclasses.replace(audit.summary, hermetic=True))
    assert '<div class="verdict" id="overall">PASS</div>' in render_html(hermetic)
    assert render_markdown(hermetic).startswith("## ✅ PASS: ")
    assert "pass-not-hermetic" not in render_html(hermetic).split("</style>")[1]

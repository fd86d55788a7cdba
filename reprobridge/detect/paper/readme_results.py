"""Result tables in the repository's README: targets where no paper states them.

Authors put their headline numbers in the README as often as in the paper (``| Cora |
81.5 |``, a table per dataset); a user seldom passes the paper. This detector reads the
top-level README's Markdown tables with the paper's own reader and emits the same
``target`` findings as :mod:`reprobridge.detect.paper.paper`, evidence ``README.md:<line>``.
The merge matches them to experiments (a row by its words and by the experiment's
parameter values: the ``cora`` row for ``--dataset cora``) and to metrics (a column by its
words), after the paper's: a paper's value for the same metric wins.

Seen in: tkipf/pygcn (``| Cora | 81.5 |``-style results), greydanus/hamiltonian-nn (its
README table of test losses), yunjey-style tutorial READMEs with accuracy tables.
"""

from __future__ import annotations

from reprobridge.detect.base import DetectContext, Detector, Finding
from reprobridge.detect.paper._paper_md import parse_markdown
from reprobridge.detect.paper.paper import targets_of

#: README files read, by name (case-insensitive), at the repository's root only.
README_NAMES = ("readme.md", "readme.markdown")


class ReadmeResultsDetector(Detector):
    """``target`` findings from the root README's Markdown tables (medium confidence)."""

    name = "readme_results"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        for entry in sorted(ctx.index, key=lambda e: e.path):
            if "/" in entry.path or entry.path.lower() not in README_NAMES:
                continue
            text = ctx.index.try_read_text(entry.path)
            if text is None:
                continue
            findings += targets_of(parse_markdown(text, entry.path), "medium", self.name)
        return findings

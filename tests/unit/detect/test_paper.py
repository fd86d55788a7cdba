"""PaperDetector on formats a fixture directory cannot hold well: PDF (built here by hand,
no binary committed), arXiv source archives, absolute paths outside the repository."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.base import DetectContext, Finding
from reprobridge.detect.findings import ClaimValue, ProjectValue
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.paper._paper_doc import (
    Cell,
    PaperDoc,
    Row,
    Table,
    direction,
    find_claims,
    parse_cell,
)
from reprobridge.detect.paper.paper import PaperDetector
from reprobridge.errors import DetectionError


def _run(root: Path, paper: str) -> DetectContext:
    return detect_repo(RepoIndex.from_directory(root), paper_path=paper, only=[PaperDetector()])


def _by_key(ctx: DetectContext, kind: str) -> dict[str, Finding]:
    return {f.key: f for f in ctx.findings if f.kind == kind}


def minimal_pdf(pages: list[list[str]], title: str | None = None) -> bytes:
    """A valid PDF whose pages show ``pages`` (lines of text, WinAnsi), with correct xref."""

    def esc(line: str) -> bytes:
        raw = line.encode("cp1252")
        return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")

    n = len(pages)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{4 + 2 * k} 0 R".encode() for k in range(n))
        + f"] /Count {n} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for k, lines in enumerate(pages):
        content = (
            b"BT /F1 11 Tf 72 740 Td "
            + b" ".join(b"(" + esc(line) + b") Tj 0 -16 Td" for line in lines)
            + b" ET"
        )
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * k} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(
            f"<< /Length {len(content)} >>\nstream\n".encode() + content + b"\nendstream"
        )
    info = None
    if title is not None:
        objects.append(b"<< /Title (" + esc(title) + b") >>")
        info = len(objects)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{off:010d} 00000 n \n".encode() for off in offsets)
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R" + (f" /Info {info} 0 R" if info else "")
    out += f"trailer\n{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


PDF_PAGES = [
    [
        "A Tiny PDF Paper",
        "We study mixup on a toy task.",
        "Table 1: Results on the toy task.",
        "Method Accuracy Loss",
        "Baseline 81.5 0.52",
        "Mixup 88.0 ± 1.2 0.61",
    ],
    ["Mixup outperforms Baseline in accuracy on every seed."],
]


def test_pdf_tables_title_and_claims(tmp_path: Path) -> None:
    (tmp_path / "paper.pdf").write_bytes(minimal_pdf(PDF_PAGES, title="A Tiny PDF Paper"))
    ctx = _run(tmp_path, "paper.pdf")
    title = _by_key(ctx, "project")["title"]
    assert title.value == ProjectValue("A Tiny PDF Paper")
    targets = _by_key(ctx, "target")
    acc = targets["Mixup::Accuracy"]
    assert acc.value.value == 88.0
    assert acc.value.spread == 1.2
    assert acc.value.table == "Table 1"
    assert acc.value.higher_is_better is True
    assert acc.sources() == ["paper.pdf:1"]
    assert "page 1" in acc.note
    assert targets["Baseline::Loss"].value.higher_is_better is False
    claim = _by_key(ctx, "claim")["Mixup>Baseline"]
    assert claim.value == ClaimValue("Mixup", "Baseline", "Accuracy")
    assert claim.sources() == ["paper.pdf:2"]


def test_pdf_title_falls_back_to_first_line(tmp_path: Path) -> None:
    (tmp_path / "paper.pdf").write_bytes(minimal_pdf(PDF_PAGES))
    assert _by_key(_run(tmp_path, "paper.pdf"), "project")["title"].value.value == (
        "A Tiny PDF Paper"
    )


def test_malformed_pdf_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "paper.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\n")
    with pytest.raises(DetectionError, match=r"paper\.pdf"):
        _run(tmp_path, "paper.pdf")


MAIN_TEX = r"""\documentclass{article}
\title{Archived Paper}
\begin{document}
\begin{table}\caption{Setup.}\begin{tabular}{lc}
Model & Params \\ \hline
Small & 1.5 \\
Large & 7.0 \\
\end{tabular}\end{table}
\input{sections/results}
\end{document}
"""
RESULTS_TEX = r"""\begin{table}
\caption{Main.}
\begin{tabular}{lcc}
\toprule
Method & BLEU & PPL \\
\midrule
Base & 27.1 & 4.9 \\
Ours & \textbf{28.4} & 4.6 \\
\bottomrule
\end{tabular}
\end{table}
Ours beats Base in BLEU.
"""


def _tarball(members: dict[str, str], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_arxiv_source_tarball_follows_inputs(tmp_path: Path) -> None:
    archive = _tarball(
        {
            "ms.tex": MAIN_TEX,
            "sections/results.tex": RESULTS_TEX,
            "old/unused.tex": RESULTS_TEX.replace("27.1", "99.9"),
            "../evil.tex": RESULTS_TEX,
        }
    )
    (tmp_path / "2401.01234.tar.gz").write_bytes(archive)
    ctx = _run(tmp_path, "2401.01234.tar.gz")
    targets = _by_key(ctx, "target")
    assert targets["Base::BLEU"].value.value == 27.1  # not the unused copy's 99.9
    assert targets["Base::BLEU"].value.table == "Table 2"  # numbered after main's table
    assert targets["Base::BLEU"].sources() == ["2401.01234.tar.gz/sections/results.tex:7"]
    assert targets["Ours::PPL"].value.higher_is_better is False
    assert targets["Large::Params"].value.table == "Table 1"
    assert _by_key(ctx, "project")["title"].value.value == "Archived Paper"
    assert _by_key(ctx, "claim")["Ours>Base"].value.metric == "BLEU"
    assert not (tmp_path / "ms.tex").exists()  # read in memory, nothing extracted


def test_single_gzipped_tex(tmp_path: Path) -> None:
    (tmp_path / "src.gz").write_bytes(gzip.compress(MAIN_TEX.encode(), mtime=0))
    ctx = _run(tmp_path, "src.gz")
    assert "Small::Params" in _by_key(ctx, "target")


def test_truncated_archive_is_a_detection_error(tmp_path: Path) -> None:
    (tmp_path / "src.tar.gz").write_bytes(_tarball({"ms.tex": MAIN_TEX})[:40])
    with pytest.raises(DetectionError, match=r"src\.tar\.gz"):
        _run(tmp_path, "src.tar.gz")


def test_absolute_paper_outside_repo(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("print('hi')\n")
    paper = tmp_path / "downloads" / "my paper.md"
    paper.parent.mkdir()
    paper.write_text("# T\n\n| Model | F1 |\n|---|---|\n| A | 0.5 |\n| B | 0.7 |\n")
    ctx = _run(repo, str(paper))
    target = _by_key(ctx, "target")["B::F1"]
    assert target.sources() == ["my paper.md:6"]  # the user's path stays out of evidence
    assert target.value.higher_is_better is True


def test_absolute_paper_inside_repo_uses_relative_evidence(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "paper.md").write_text("| Model | Acc |\n|---|---|\n| A | 1 |\n")
    ctx = _run(tmp_path, str(tmp_path / "docs" / "paper.md"))
    assert _by_key(ctx, "target")["A::Acc"].sources() == ["docs/paper.md:3"]


def test_no_tables_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "paper.md").write_text("# Only prose\n\nNothing to see.\n")
    ctx = _run(tmp_path, "paper.md")
    assert [f.key for f in ctx.findings] == ["title"]
    assert any("no result tables" in w.message for w in ctx.warnings)


def test_binary_paper_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "paper.md").write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(DetectionError, match=r"paper\.md"):
        _run(tmp_path, "paper.md")


def test_no_paper_no_findings(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    ctx = detect_repo(RepoIndex.from_directory(tmp_path), only=[PaperDetector()])
    assert ctx.findings == []


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("91.2", Cell(91.2)),
        ("**91.2**", Cell(91.2)),
        ("91.2 ± 0.3", Cell(91.2, 0.3)),
        ("91.2±0.3%", Cell(91.2, 0.3, True)),
        ("91.2%", Cell(91.2, None, True)),
        ("76.1 (0.4)", Cell(76.1, 0.4)),
        ("1,281,167", Cell(1281167.0)),
        ("−0.5", Cell(-0.5)),
        ("92.0†", Cell(92.0)),
        ("–", None),
        ("n/a", None),
        ("ResNet-50", None),
        ("11M", None),
    ],
)
def test_parse_cell(text: str, cell: Cell | None) -> None:
    assert parse_cell(text) == cell


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        ("Top-1 Acc. (%)", True),
        ("F1", True),
        ("BLEU", True),
        ("val_loss", False),
        ("Val loss", False),
        ("Perplexity", False),
        ("RMSE", False),
        ("Time ↓", False),
        ("Error ↑", True),  # the arrow wins
        ("Params", None),
    ],
)
def test_direction(column: str, expected: bool | None) -> None:
    assert direction(column) is expected


CLAIM_SENTENCES = {
    "Mixup improves accuracy over the baseline.": [("Mixup (ours)", "Baseline", "Accuracy")],
    "Our method beats CutMix.": [("Mixup (ours)", "CutMix", None)],
    "CutMix is better than Baseline in loss.": [("CutMix", "Baseline", "Loss")],
    "Mixup achieves higher accuracy than CutMix.": [("Mixup (ours)", "CutMix", "Accuracy")],
    "Baseline has a lower loss than Mixup.": [("Baseline", "Mixup (ours)", "Loss")],
    "Baseline has lower accuracy than CutMix.": [("CutMix", "Baseline", "Accuracy")],
    "The baseline underperforms mixup.": [("Mixup (ours)", "Baseline", None)],
    "Mixup and CutMix both outperform the baseline.": [
        ("Mixup (ours)", "Baseline", None),
        ("CutMix", "Baseline", None),
    ],
    "CutMix is not better than the baseline.": [],
    "We compare Mixup with Baseline.": [],
    "Mixup outperforms prior work.": [],
}


@pytest.mark.parametrize("sentence", sorted(CLAIM_SENTENCES))
def test_claim_sentences(sentence: str) -> None:
    table = Table(
        "Table 1",
        "",
        ["Accuracy ↑", "Loss"],
        [
            Row(label, ["1", "2"], k)
            for k, label in enumerate(["Baseline", "Mixup (ours)", "CutMix"])
        ],
    )
    doc = PaperDoc("p.md", tables=[table], sentences=[(sentence, 7)])
    got = [(c.better, c.worse, c.metric) for c in find_claims([doc])]
    assert got == CLAIM_SENTENCES[sentence]

"""The report shows what the experiment produced: the images a run declared as outputs
(embedded as data: URIs, bounded), each regex metric's values over the run as a curve,
and each claim as a picture of its two sides.

Real audits throughout: a fixture repository whose run writes a small valid PNG, an SVG
with a script in it and an oversize PNG into a declared ``images`` directory, and prints
its loss 20 times; and the session's audit of the bundled example for the claim."""

from __future__ import annotations

import base64
import html
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from example_outcome import CLAIM
from report_helpers import PROBLEMS, Audits, chromium

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.report.curves import MAX_CURVE_POINTS, run_curves
from reprobridge.report.html import CSP, render_html
from reprobridge.report.images import ImageBudget, run_images
from reprobridge.report.load import load_audit

LOSSES = [round(1.0 - i / 40, 4) for i in range(20)]


def _png() -> bytes:
    """A valid 4x4 RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xd9\x73\x0d" * 4 for _ in range(4))
    header = struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><script>alert(7)</script></svg>'


@pytest.fixture
def produced(tiny_repo: Callable[..., Path]) -> Path:
    """The bundle of one run that wrote three images and printed its loss 20 times."""
    png = base64.b64encode(_png()).decode()
    svg = base64.b64encode(SVG.encode()).decode()
    script = (
        "mkdir -p images\n"
        f"echo {png} | base64 -d > images/frame.png\n"
        f"echo {svg} | base64 -d > images/plot.svg\n"
        # 3 MiB behind a PNG signature: over the per-image limit.
        "{ printf '\\211PNG\\r\\n\\032\\n'; head -c 3145728 /dev/zero; } > images/big.png\n"
        "echo 'not an image' > notes.txt\n"
        + "".join(f"echo 'step {i} loss={v}'\n" for i, v in enumerate(LOSSES))
        + "echo acc=0.9\n"
    )
    root = tiny_repo(script, name="produced")
    manifest = root / "reprobridge.toml"
    text = manifest.read_text().replace(
        "[experiments.main.metrics.acc]",
        'outputs = [{path = "images"}, {path = "notes.txt"}]\n'
        '[experiments.main.metrics.loss]\nsource = {regex = "loss=([0-9.]+)"}\nmax = 2\n'
        "[experiments.main.metrics.acc]",
    )
    manifest.write_text(text)
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "outputs"], check=True)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    files = result.path / "runs" / "main" / "0" / "files"
    assert (files / "images" / "big.png").stat().st_size > 3 << 20  # copied in full
    return result.path


def _svg_labelled(page: str, label: str) -> str:
    shown = re.escape(html.escape(label))
    match = re.search(rf'<svg [^>]*aria-label="{shown}".*?</svg>', page, re.S)
    assert match is not None, label
    return match.group(0)


def test_the_page_embeds_declared_images_and_names_the_oversize_one(produced: Path) -> None:
    page = render_html(load_audit(produced))
    png = base64.b64encode(_png()).decode()
    assert f'<img src="data:image/png;base64,{png}" alt="images/frame.png">' in page
    assert f"images/frame.png, {len(_png())} B" in page
    # The SVG is an image, never markup of the page: its script is base64 inside a data URI.
    svg = base64.b64encode(SVG.encode()).decode()
    assert f'<img src="data:image/svg+xml;base64,{svg}" alt="images/plot.svg">' in page
    assert "<script" not in page and "alert(7)" not in page
    # Over the limit: named with its size, its bytes not in the page.
    assert "images/big.png, 3 MiB: not embedded: 3 MiB, over the 2 MiB limit per image" in page
    assert len(page) < 1 << 20
    assert "notes.txt" not in page.split('id="exp-0"')[1].split("Resources")[0]
    assert CSP.endswith("img-src data:") and f'content="{CSP}"' in page


def test_each_printed_value_is_a_point_of_the_runs_curve(produced: Path) -> None:
    audit = load_audit(produced)
    (run,) = audit.experiments[0].runs
    assert run.curves["loss"].count == 20
    assert [v for _, v in run.curves["loss"].points] == LOSSES
    page = render_html(audit)
    chart = _svg_labelled(page, "loss over each run")
    (points,) = re.findall(r'<polyline class="line s0" points="([^"]+)"', chart)
    assert len(points.split()) == 20  # one run: a line through every value, not one dot
    assert "loss as printed over each run (run 1: 20 value(s))" in page
    # acc is printed once: its strip plot shows it, no one-point curve.
    assert 'aria-label="acc over each run"' not in page


def test_a_page_of_many_images_embeds_until_its_budget_is_spent(
    produced: Path, tmp_path: Path
) -> None:
    files = produced / "runs" / "main" / "0" / "files"
    budget = ImageBudget(total=100)
    images = {i.path: i for i in run_images(files, ["images"], budget)}
    assert images["images/frame.png"].data_uri is not None
    assert images["images/plot.svg"].data_uri is None  # 67 + 102 bytes > 100
    assert "over what is left of the 100 B limit for the page's images" in (
        images["images/plot.svg"].reason
    )
    # Only declared outputs are looked at; a link planted in the bundle (to a file or to a
    # directory) is never followed.
    (files / "images" / "zlink.png").symlink_to(files / "images" / "frame.png")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(_png())
    (files / "images" / "zdir").symlink_to(outside)
    assert sorted(i.path for i in run_images(files, ["images"], ImageBudget())) == [
        "images/big.png",
        "images/frame.png",
        "images/plot.svg",
    ]
    assert run_images(files, ["other"], ImageBudget()) == []


def test_a_claim_is_drawn_with_both_sides_and_its_test(audits: Audits) -> None:
    audit = load_audit(audits.first)
    (claim,) = audit.claims
    page = render_html(audit)
    chart = _svg_labelled(page, f"claim {CLAIM}: the values of each side")
    assert ">mixup.test_accuracy</text>" in chart and ">baseline.test_accuracy</text>" in chart
    assert chart.count("<circle") == 4  # two runs on each side
    assert chart.count('<g class="mean">') == 2
    caption = f"{CLAIM}: holds on the means, not significant ({claim.test})"
    assert claim.test.startswith("paired t test") and html.escape(caption) in page


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_the_page_with_images_loads_clean_in_a_browser(produced: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(load_audit(produced)))
    got = chromium(page, tmp_path, "--dump-dom")
    assert got.returncode == 0, got.stderr[-2000:]
    assert [line for line in got.stderr.splitlines() if PROBLEMS.search(line)] == []
    assert got.stdout.count('<img src="data:image/') == 2


def test_a_long_log_is_drawn_with_a_bounded_number_of_points(tmp_path: Path) -> None:
    log = "".join(f"step {i} loss={1 / (i + 1):.6f}\n" for i in range(5000))
    (tmp_path / "output.log").write_text(log + "loss=nan loss=1e999\n")  # not finite: skipped
    curve = run_curves({"loss": "loss=([0-9.a-z+]+)"}, tmp_path)["loss"]
    assert (curve.count, len(curve.points)) == (5000, MAX_CURVE_POINTS)
    assert curve.points[0] == (1, 1.0) and curve.points[-1] == (5000, 0.0002)
    assert curve.describe() == f"5000 value(s), {MAX_CURVE_POINTS} drawn"

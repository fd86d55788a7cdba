"""REPRODUCE.md: what the guide tells a reader about tiers, candidates and the environment."""

from __future__ import annotations

from artifacts_helpers import VERSION, sample_manifest_data

from reprobridge.artifacts.guide import GuideNotes, render_guide
from reprobridge.manifest.schema import Manifest


def _guide(notes: GuideNotes | None = None) -> str:
    data = sample_manifest_data()
    data["experiments"] = {
        "adder": {
            "command": "python adder.py",
            "tiers": {"smoke": {"args": ["--trainer.max_iters=20"]}},
        },
        "bigram": {"command": "python bigram.py"},
    }
    data["claims"] = []
    return render_guide(Manifest.model_validate(data), notes or GuideNotes(), version=VERSION)


def test_smoke_tier_args_and_the_lack_of_a_smoke_tier_are_said() -> None:
    text = _guide()
    adder, bigram = text.split("### `adder`")[1].split("### `bigram`")
    assert "The smoke tier appends `--trainer.max_iters=20` to the command." in adder
    assert "No smoke tier" not in adder
    assert "No smoke tier: rb found no parameter that bounds this run" in bigram


def test_without_nix_the_guide_says_how_to_make_the_venv_the_launcher_uses() -> None:
    text = _guide()
    assert "uv sync --project repro/python       # creates repro/python/.venv" in text
    assert "bash repro/launchers/adder.sh" in text


def test_other_candidates_are_listed_with_why() -> None:
    text = _guide(GuideNotes(dropped_experiments=["tutorials/a.ipynb: `jupyter ...` (score 3)"]))
    section = text.split("## Other candidates")[1]
    assert "- tutorials/a.ipynb: `jupyter ...` (score 3)" in section
    assert "copy" in section.split("\n- ")[0]

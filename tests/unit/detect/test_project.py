"""ProjectDetector: license texts to SPDX ids, and what a broken CITATION.cff costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.declared.project import ProjectDetector, classify_license
from reprobridge.detect.index import RepoIndex

MIT = "MIT License\n\nCopyright (c) 2024 X\n\nPermission is hereby granted, free of charge, to any"
BSD3 = (
    "Copyright (c) 2024\n\nRedistribution and use in source and binary forms, with or without\n"
    "modification, are permitted ...\n3. Neither the name of the copyright holder nor"
)
BSD2 = "Copyright (c) 2024\nRedistribution and use in source and binary forms, with or without"
GPL3 = (
    "                    GNU GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007"
)
GPL2 = "                    GNU GENERAL PUBLIC LICENSE\n                       Version 2, June 1991"
LGPL = "                   GNU LESSER GENERAL PUBLIC LICENSE\n                       Version 3"
APACHE = "\n                                 Apache License\n                           Version 2.0"
CCBYNC = "Attribution-NonCommercial 4.0 International\n\nCreative Commons Corporation"


@pytest.mark.parametrize(
    ("text", "spdx"),
    [
        (MIT, "MIT"),
        (BSD3, "BSD-3-Clause"),
        (BSD2, "BSD-2-Clause"),
        (GPL3, "GPL-3.0"),
        (GPL2, "GPL-2.0"),
        (LGPL, "LGPL-3.0"),
        (APACHE, "Apache-2.0"),
        (CCBYNC, "CC-BY-NC-4.0"),
        ("All rights reserved.", None),
    ],
)
def test_classify_license(text: str, spdx: str | None) -> None:
    assert classify_license(text) == spdx


def _run(root: Path):  # type: ignore[no-untyped-def]
    return detect_repo(RepoIndex.from_directory(root), only=[ProjectDetector()])


def test_unknown_license_warns_and_falls_back(tmp_path: Path) -> None:
    (tmp_path / "LICENSE").write_text("All rights reserved. Ask us first.\n")
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = cfgpkg\nlicense = MIT\n")
    ctx = _run(tmp_path)
    found = {f.key: (f.value.value, f.sources()) for f in ctx.findings}
    assert found == {"name": ("cfgpkg", ["setup.cfg:2"]), "license": ("MIT", ["setup.cfg:3"])}
    assert any(w.path == "LICENSE" for w in ctx.warnings)


def test_broken_citation_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "CITATION.cff").write_text("title: [oops\n")
    ctx = _run(tmp_path)
    assert ctx.findings == []
    assert [w.path for w in ctx.warnings] == ["CITATION.cff"]


def test_nothing_to_find(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    ctx = _run(tmp_path)
    assert ctx.findings == [] and ctx.warnings == []

"""The suite file: valid suites load, every mistake is one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobridge.bench.suite import load_suite, resolve_source
from reprobridge.errors import ManifestError, SuiteError


def _suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(text)
    return path


def test_a_valid_suite_loads_with_defaults(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    suite, base = load_suite(
        _suite(
            tmp_path,
            """
[bench]
name = "mini"
time_limit_s = 30
[[repo]]
name = "a"
path = "here"
dependencies = ["torch", "scikit-learn|sklearn"]
expected = { acc = { value = 0.9, tolerance = 0.05 } }
[[repo]]
name = "b"
url = "https://example.org/b.git"
commit = "0123456789abcdef0123456789abcdef01234567"
cpu_runnable = false
""",
        )
    )
    assert suite.bench.time_limit_s == 30
    assert [r.name for r in suite.repos] == ["a", "b"]
    assert suite.repos[0].expected["acc"].met_by(0.93)
    assert not suite.repos[0].expected["acc"].met_by(0.8)
    assert resolve_source(suite.repos[0], base) == tmp_path / "here"
    assert resolve_source(suite.repos[1], base) is None


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (
            '[[repo]]\nname = "a"\npath = "x"\ndependncies = []\n',
            "repo.0.dependncies",
            "did you mean 'dependencies'",
        ),
        ('[[repo]]\nname = "a"\nurl = "https://e.org/a"\n', "repo.0", "`url` needs `commit`"),
        ('[[repo]]\nname = "a"\n', "repo.0", "needs `path`"),
        ('[[repo]]\nname = "../x"\npath = "x"\n', "repo.0", "a file name"),
        ('[[repo]]\nname = "a"\nurl = "u"\ncommit = "main"\n', "repo.0", "not a hex commit"),
        (
            '[[repo]]\nname = "a"\npath = "x"\n[[repo]]\nname = "A"\npath = "y"\n',
            None,
            "two repositories",
        ),
        ('[bench]\nname = "x"\n', "repo", "required"),
        (
            '[[repo]]\nname = "a"\npath = "x"\nexpected = { acc = { value = "high" } }\n',
            "repo.0.expected.acc.value",
            "number",
        ),
        (
            '[[repo]]\nname = "a"\npath = "x"\nexpected = { acc = { value = 1, tol = 1 } }\n',
            "repo.0.expected.acc.tol",
            "unknown key",
        ),
        ("[[repo]\n", None, "not valid TOML"),
    ],
)
def test_mistakes_are_one_line_naming_the_field(
    tmp_path: Path, text: str, field: str | None, words: str
) -> None:
    path = _suite(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert words in message
    if field is not None:
        assert info.value.field == field
    # A suite is an input a person wrote, like the manifest: the same exit code.
    assert isinstance(info.value, ManifestError) and info.value.exit_status() == 3


def test_a_missing_suite_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="no such file"):
        load_suite(tmp_path / "absent.toml")

"""Manifest loading, validation messages, rendering and the edit-preserving refresh."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from reprobridge.errors import ManifestError, ManifestNotFoundError, SchemaVersionError
from reprobridge.manifest.io import (
    digest,
    load_manifest,
    parse_document,
    refresh_document,
    render_new_manifest,
)
from reprobridge.manifest.schema import Derivation, Manifest

BASE = {
    "schema": 1,
    "project": {"name": "demo"},
    "environment": {"python": "3.11"},
    "experiments": {
        "base": {
            "command": "python train.py --lr {lr} --seed {seed}",
            "params": {"lr": 0.1},
            "seeds": [0],
            "metrics": {
                "acc": {"source": {"regex": "acc=([0-9.]+)"}, "target": 0.9, "tolerance": 0.02}
            },
        }
    },
}


def _derived(m: dict) -> Manifest:
    from reprobridge.manifest.io import flatten, manifest_data

    model = Manifest.model_validate(m)
    leaves = flatten(
        {k: v for k, v in manifest_data(model).items() if k not in {"schema", "derived"}}
    )
    derived = {p: Derivation(sources=["x.py:1"], digest=digest(v)) for p, v in leaves.items()}
    return model.model_copy(update={"derived": derived})


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "reprobridge.toml"
    p.write_text(text)
    return p


def test_round_trip_renders_deterministically() -> None:
    m = _derived(BASE)
    a = render_new_manifest(m, version="0.1.0")
    b = render_new_manifest(m, version="0.1.0")
    assert a == b
    again = Manifest.model_validate(parse_document(a, path="x").unwrap())
    assert again.experiments["base"].metrics["acc"].target == 0.9
    assert "[experiments.base.metrics.acc]" in a


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestNotFoundError, match=r"reprobridge\.toml: not found"):
        load_manifest(tmp_path / "reprobridge.toml")


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    p = write(tmp_path, 'schema = 1\n[project\nname = "x"\n')
    with pytest.raises(ManifestError, match=r"reprobridge.toml: not valid TOML.*line 2"):
        load_manifest(p)


def test_unknown_key_did_you_mean(tmp_path: Path) -> None:
    text = render_new_manifest(_derived(BASE), version="0").replace("tolerance = ", "tolerence = ")
    with pytest.raises(ManifestError) as exc:
        load_manifest(write(tmp_path, text))
    assert str(exc.value) == (
        "reprobridge.toml: experiments.base.metrics.acc.tolerence: unknown key (did you mean 'tolerance'?)"
    )
    assert exc.value.exit_code == 3


def test_unknown_top_level_key(tmp_path: Path) -> None:
    with pytest.raises(
        ManifestError, match=r"experimnts: unknown key \(did you mean 'experiments'\?\)"
    ):
        load_manifest(write(tmp_path, 'schema = 1\nexperimnts = {}\n[project]\nname = "x"\n'))


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_non_finite_numbers_rejected(tmp_path: Path, bad: str) -> None:
    text = render_new_manifest(_derived(BASE), version="0").replace(
        "target = 0.9", f"target = {bad}"
    )
    with pytest.raises(
        ManifestError, match=r"experiments.base.metrics.acc.target: is not a finite number"
    ):
        load_manifest(write(tmp_path, text))


def test_schema_version(tmp_path: Path) -> None:
    with pytest.raises(SchemaVersionError, match="schema version 2"):
        load_manifest(write(tmp_path, 'schema = 2\n[project]\nname = "x"\n'))


@pytest.mark.parametrize("exp_id", ["../evil", "A", "with space", "x" * 70, "-lead"])
def test_experiment_ids_safe_as_directory_names(tmp_path: Path, exp_id: str) -> None:
    doc = f'schema = 1\n[project]\nname = "x"\n[experiments."{exp_id}"]\ncommand = "true"\n'
    with pytest.raises(ManifestError, match="experiments"):
        load_manifest(write(tmp_path, doc))


def test_placeholder_without_param(tmp_path: Path) -> None:
    doc = 'schema = 1\n[project]\nname = "x"\n[experiments.a]\ncommand = "python t.py --lr {lr}"\n'
    with pytest.raises(ManifestError, match=r"experiments.a: .*\{lr\}"):
        load_manifest(write(tmp_path, doc))


def test_regex_needs_a_group(tmp_path: Path) -> None:
    doc = (
        'schema = 1\n[project]\nname = "x"\n[experiments.a]\ncommand = "true"\n'
        '[experiments.a.metrics.m]\nsource = { regex = "acc=[0-9.]+" }\n'
    )
    with pytest.raises(ManifestError, match="capturing group"):
        load_manifest(write(tmp_path, doc))


def test_refresh_keeps_edits_and_comments() -> None:
    old = _derived(BASE)
    text = render_new_manifest(old, version="0")
    doc = parse_document(text, path="x")
    # A person edits the target, adds a comment and a key of their own.
    doc["experiments"]["base"]["metrics"]["acc"]["target"] = 0.95
    doc["experiments"]["base"].add(tomlkit.comment("checked against the camera-ready"))
    doc["experiments"]["base"]["timeout"] = "3h"
    # rb now derives a different lr and a different target.
    new_data = {
        **BASE,
        "experiments": {"base": {**BASE["experiments"]["base"], "params": {"lr": 0.2}}},
    }
    new_data["experiments"]["base"]["metrics"] = {
        "acc": {"source": {"regex": "acc=([0-9.]+)"}, "target": 0.91, "tolerance": 0.02}
    }
    merged, report = refresh_document(doc, _derived(new_data), path="x")
    out = merged.as_string()
    assert "checked against the camera-ready" in out
    data = merged.unwrap()
    assert data["experiments"]["base"]["metrics"]["acc"]["target"] == 0.95  # edit kept
    assert data["experiments"]["base"]["params"]["lr"] == 0.2  # derived value refreshed
    assert data["experiments"]["base"]["timeout"] == "3h"  # hand-added key kept
    assert "experiments.base.metrics.acc.target" in report.kept_edits
    assert "experiments.base.params.lr" in report.updated
    # The edited value is now the person's: the next refresh still keeps it.
    merged2, _ = refresh_document(merged, _derived(new_data), path="x")
    assert merged2.unwrap()["experiments"]["base"]["metrics"]["acc"]["target"] == 0.95
    assert merged2.as_string() == out


def test_refresh_respects_deleted_experiment() -> None:
    two = {**BASE, "experiments": {**BASE["experiments"], "other": {"command": "python o.py"}}}
    doc = parse_document(render_new_manifest(_derived(two), version="0"), path="x")
    del doc["experiments"]["other"]
    merged, report = refresh_document(doc, _derived(two), path="x")
    assert "other" not in merged.unwrap()["experiments"]
    assert any(k.startswith("experiments.other") for k in report.kept_deletions)


def test_refresh_removes_stale_derived_values() -> None:
    two = {**BASE, "experiments": {**BASE["experiments"], "other": {"command": "python o.py"}}}
    doc = parse_document(render_new_manifest(_derived(two), version="0"), path="x")
    merged, report = refresh_document(doc, _derived(BASE), path="x")
    assert "other" not in merged.unwrap()["experiments"]
    assert "experiments.other.command" in report.removed


def test_refresh_idempotent() -> None:
    m = _derived(BASE)
    text = render_new_manifest(m, version="0")
    merged, report = refresh_document(parse_document(text, path="x"), m, path="x")
    assert merged.as_string() == text
    assert not (report.updated or report.added or report.removed or report.kept_edits)


# -- linear table building (issue 14) ---------------------------------------------------


def _fill_cases() -> list[list[tuple[str, object]]]:
    from reprobridge.manifest.io import _to_item

    derived = {
        "experiments.base.command": {"sources": ["train.py:3"], "digest": "0" * 16},
        "a key with spaces": {"sources": ["x" * 80, "ü"], "digest": "1" * 16},
        'quote"d': {"sources": [], "digest": "2" * 16, "confidence": "low"},
    }
    plain = [(k, _to_item(v, ("derived", k))) for k, v in derived.items()]
    scalars: list[tuple[str, object]] = [
        ("s", "text"),
        ("i", 3),
        ("f", 0.5),
        ("b", False),
        ("arr", tomlkit.array("[1, 2]")),
        ("as_table", {"x": 1}),  # a raw dict becomes a [t.as_table] table: the fallback
    ]
    sub = tomlkit.table()
    sub.add("k", 1)
    # A sub-table before plain keys: `add` moves the keys above it (the fallback path).
    mixed: list[tuple[str, object]] = [("first", 1), ("sub", sub), ("after", "v")]
    no_dict = [(k, v) for k, v in scalars if k != "as_table"]
    return [plain, scalars, mixed, [], no_dict]


@pytest.mark.parametrize("case", range(5))
def test_fill_table_matches_add(case: int) -> None:
    """fill_table (linear) must lay out exactly what a `Table.add` loop does, inside a
    document with content before and a table after, so a tomlkit upgrade that changes
    either way shows up here."""
    from reprobridge.manifest.io import fill_table

    texts = []
    for way in ("add", "fill"):
        entries = _fill_cases()[case]  # fresh items: tomlkit items belong to one parent
        table = tomlkit.table()
        if way == "add":
            for key, value in entries:
                table.add(key, value)
        else:
            fill_table(table, entries)
        doc = tomlkit.document()
        doc.add(tomlkit.comment("head"))
        doc.add("schema", 1)
        doc.add("t", table)
        after = tomlkit.table()
        after.add("z", 1)
        doc.add("later", after)
        texts.append(tomlkit.dumps(doc))
        # The table stays editable the ordinary way afterwards.
        table.add("added_later", 2)
        texts.append(tomlkit.dumps(doc))
    assert texts[:2] == texts[2:]
    assert tomlkit.parse(texts[0]) == tomlkit.parse(texts[2])


def test_fill_table_rejects_duplicate_keys() -> None:
    from tomlkit.exceptions import KeyAlreadyPresent

    from reprobridge.manifest.io import fill_table

    with pytest.raises(KeyAlreadyPresent):
        fill_table(tomlkit.table(), [("a", 1), ("a", 2)])


def _manifest_with_derived(n: int) -> Manifest:
    return Manifest.model_validate(
        {
            **BASE,
            "derived": {
                f"experiments.base.k{i:04d}": {"sources": [f"f.py:{i}"], "digest": f"{i:016x}"}
                for i in range(n)
            },
        }
    )


def test_render_and_refresh_do_not_rescan_the_table_per_key(monkeypatch) -> None:
    """The quadratic step was tomlkit's per-`add` scan of the table body for the last key
    before a sub-table; building [derived] must not scan the table once per derived key."""
    from tomlkit.container import Container

    scanned = 0  # body entries scanned, summed over calls: n**2/2 when quadratic
    real = Container._get_last_index_before_table

    def counting(self: Container) -> int:
        nonlocal scanned
        scanned += len(self.body)
        return real(self)

    monkeypatch.setattr(Container, "_get_last_index_before_table", counting)
    manifest = _manifest_with_derived(300)
    text = render_new_manifest(manifest, version="t")
    assert scanned < 10 * 300, scanned  # each derived entry's own small inline table only
    assert text.count('\n"experiments.base.k') == 300

    scanned = 0
    doc = parse_document(render_new_manifest(Manifest.model_validate(BASE), version="t"), path="x")
    refresh_document(doc, manifest, path="x")
    assert scanned < 10 * 300, scanned


_READ_CASES = {
    "valid": None,
    "malformed": 'schema = 1\n[project\nname = "x"\n',
    "unknown-key": 'schema = 1\nexperimnts = {}\n[project]\nname = "x"\n',
    "schema-2": 'schema = 2\n[project]\nname = "x"\n',
    "nan": None,
    "no-group": (
        'schema = 1\n[project]\nname = "x"\n[experiments.a]\ncommand = "true"\n'
        '[experiments.a.metrics.m]\nsource = { regex = "acc=[0-9.]+" }\n'
    ),
    "duplicate-key": 'schema = 1\n[project]\nname = "x"\nname = "y"\n',
}


@pytest.mark.parametrize("case", sorted(_READ_CASES))
def test_read_manifest_is_load_manifest_without_the_document(tmp_path: Path, case: str) -> None:
    # read_manifest parses with tomllib (issue 14: validate-only reads); it must accept,
    # reject and word its errors exactly as load_manifest does.
    from reprobridge.manifest.io import read_manifest

    text = _READ_CASES[case]
    if text is None:
        text = render_new_manifest(_derived(BASE), version="0")
        if case == "nan":
            text = text.replace("target = 0.9", "target = nan")
    path = write(tmp_path, text)
    outcomes = []
    for reader in (lambda p: load_manifest(p)[0], read_manifest):
        try:
            outcomes.append(("ok", reader(path).model_dump()))
        except ManifestError as exc:
            outcomes.append((type(exc).__name__, str(exc)))
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0][0] == "ok") == (case == "valid")


def test_a_validating_read_imports_neither_tomlkit_nor_difflib(tmp_path: Path) -> None:
    # Issue 14: `rb archive` and `rb audit` only validate reprobridge.toml (tomllib +
    # pydantic); tomlkit (a document to rewrite) and difflib (a "did you mean" for an error)
    # were imported at the top of manifest/io and manifest/validation for every run.
    import subprocess
    import sys

    path = write(tmp_path, render_new_manifest(_derived(BASE), version="0"))
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from reprobridge.manifest.io import read_manifest\n"
        f"m = read_manifest(Path({str(path)!r}))\n"
        "print(m.project.name, sorted(x for x in ('tomlkit', 'difflib') if x in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["demo", "[]"], out.stdout + out.stderr
    # The error path still words its messages with both (syntax error: tomlkit's line and
    # column; unknown key: difflib's suggestion).
    from reprobridge.manifest.io import read_manifest

    with pytest.raises(ManifestError, match=r"line 2"):
        read_manifest(write(tmp_path, 'schema = 1\n[project\nname = "x"\n'))
    with pytest.raises(ManifestError, match=r"did you mean 'experiments'"):
        read_manifest(write(tmp_path, 'schema = 1\nexperimnts = {}\n[project]\nname = "x"\n'))


def test_no_manifest_list_field_defaults_through_the_builtin_list() -> None:
    # Issue 14: pydantic takes each default factory's inspect.signature while it builds the
    # models; for the builtin `list` that parses a text signature with tokenize (~0.3 ms a
    # field, ~6 ms of every start that loads the manifest). `_empty` is a plain function.
    import pydantic

    import reprobridge.manifest.schema as schema

    models = [
        m
        for m in vars(schema).values()
        if isinstance(m, type)
        and issubclass(m, pydantic.BaseModel)
        and m.__module__ == schema.__name__
    ]
    assert len(models) > 10
    slow = [
        f"{m.__name__}.{name}"
        for m in models
        for name, f in m.model_fields.items()
        if f.default_factory is list
    ]
    assert slow == []


@pytest.mark.parametrize(
    ("line", "key", "expected"),
    [
        ('min = "0.5"', "min", 'expected a number, e.g. min = 0.5; got the string "0.5"'),
        ("max = true", "max", "expected a number, e.g. max = 0.5; got true"),
        ('claimed = "91"', "claimed", 'expected a number, e.g. claimed = 0.5; got the string "91"'),
        (
            'range = ["0", 1]',
            "range.0",
            'expected a number, e.g. range = [0, 1]; got the string "0"',
        ),
    ],
)
def test_a_threshold_written_as_text_is_refused_naming_the_form(
    tmp_path: Path, line: str, key: str, expected: str
) -> None:
    """pydantic's lax mode turned ``min = "0.5"`` into 0.5 and ``max = true`` into 1.0: a
    threshold is a TOML number, and anything else is one line naming the key and the form."""
    text = render_new_manifest(_derived(BASE), version="0").replace(
        "tolerance = 0.02", f"tolerance = 0.02\n{line}"
    )
    with pytest.raises(ManifestError) as exc:
        load_manifest(write(tmp_path, text))
    assert str(exc.value) == f"reprobridge.toml: experiments.base.metrics.acc.{key}: {expected}"
    assert exc.value.exit_code == 3


@pytest.mark.parametrize("field", ["target", "tolerance", "relative_tolerance"])
def test_every_numeric_metric_field_is_strict(tmp_path: Path, field: str) -> None:
    data = {**BASE, "experiments": {"base": {**BASE["experiments"]["base"]}}}  # type: ignore[dict-item]
    acc = {"source": {"regex": "acc=([0-9.]+)"}, "target": 0.9, field: "0.5"}
    data["experiments"]["base"]["metrics"] = {"acc": acc}  # type: ignore[index]
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=rf'e\.g\. {field} = 0\.5; got the string "0\.5"'):
        Manifest.model_validate(data)
    acc[field] = 1  # an integer is a number
    assert Manifest.model_validate(data).experiments["base"].metrics["acc"].target is not None


def test_stability_k_is_a_whole_number_not_text() -> None:
    from pydantic import ValidationError

    from reprobridge.manifest.schema import Stability

    with pytest.raises(ValidationError, match=r'e\.g\. k = 2; got the string "2"'):
        Stability.model_validate({"policy": "k_of_n", "k": "2"})
    assert Stability.model_validate({"policy": "k_of_n", "k": 2}).k == 2

"""The package table (reprobridge/data/packages.toml): data, loaded once, with checked rules."""

from __future__ import annotations

import tomllib
from importlib.resources import files

import pytest
from packaging.utils import canonicalize_name

from reprobridge.data import load_packages
from reprobridge.detect import _pkgmap
from reprobridge.detect._pkgmap import (
    IMPORT_TO_DIST,
    NOT_ON_PYPI,
    PROVIDERS,
    PYTHON_SYSTEM_NEEDS,
    SUBMODULE_DISTS,
    submodule_dists,
)


def test_table_is_a_data_file_not_python_literals() -> None:
    text = files("reprobridge.data").joinpath("packages.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    assert data["imports"]["sklearn"] == "scikit-learn"
    # the module holds no literal rules of its own
    source = files("reprobridge.detect").joinpath("_pkgmap.py").read_text(encoding="utf-8")
    assert '"opencv-python"' not in source and '"scikit-learn"' not in source


def test_every_distribution_name_is_canonical() -> None:
    dists = list(IMPORT_TO_DIST.values())
    dists += [d for group in PROVIDERS.values() for d in group]
    dists += [d for group in SUBMODULE_DISTS.values() for d in group]
    dists += list(PYTHON_SYSTEM_NEEDS)
    assert [d for d in dists if canonicalize_name(d) != d] == []


@pytest.mark.parametrize(
    ("name", "dist"),
    [
        ("ignite", "pytorch-ignite"),  # PyPI's `ignite` is an unrelated project
        ("sklearn", "scikit-learn"),
        ("cv2", "opencv-python"),
        ("tree", "dm-tree"),
        ("pyro", "pyro-ppl"),
    ],
)
def test_import_rules(name: str, dist: str) -> None:
    assert IMPORT_TO_DIST[name] == dist


def test_submodule_rules_match_by_longest_prefix() -> None:
    assert submodule_dists("torch.utils.tensorboard") == ("tensorboard",)
    assert submodule_dists("torch.utils.tensorboard.writer") == ("tensorboard",)
    assert submodule_dists("torch.utils.data") == ()
    assert submodule_dists("torch") == ()  # the package itself is the imports table's job
    assert submodule_dists("pytorch_lightning.loggers.TensorBoardLogger") == ("tensorboard",)


def test_not_on_pypi_values_are_direct_references() -> None:
    assert all(" @ git+https://" in req for req in NOT_ON_PYPI.values())


def test_a_broken_table_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    # A duplicated key is an error of the data file, not a silent override (TOML says so).
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads('[imports]\ntree = "dm-tree"\ntree = "tree"\n')
    assert load_packages() is _pkgmap._DATA  # read once, shared


def test_placeholder_renames_are_canonical_and_final() -> None:
    """A renamed requirement names a canonical distribution that is not itself renamed,
    and the import a placeholder stands for maps to the same distribution."""
    renamed = _pkgmap.RENAMED_REQUIREMENTS
    assert renamed["sklearn"] == "scikit-learn" == IMPORT_TO_DIST["sklearn"]
    for placeholder, real in renamed.items():
        assert canonicalize_name(placeholder) == placeholder
        assert canonicalize_name(real) == real
        assert real not in renamed, f"{placeholder} -> {real} is renamed again"

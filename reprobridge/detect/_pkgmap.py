"""Name tables shared by the dependency detectors, loaded once from ``data/packages.toml``.

The rules are data (a new one is a line in the TOML file and a test); this module only
types them. Tables:

* :data:`IMPORT_TO_DIST` — top-level import name -> the PyPI distribution to install. Names
  not listed map to themselves. :data:`PROVIDERS` lists other distributions that provide the
  same import (``opencv-python-headless`` for ``cv2``), so a repository that declares any of
  them is not flagged; :data:`PROVIDER_PREFIXES` the same by name prefix.
* :data:`SUBMODULE_DISTS` — a dotted import path (``torch.utils.tensorboard``, or
  ``module.Name`` for ``from module import Name``) -> further distributions it needs.
* :data:`CALL_DISTS` — ``gym:render`` -> distributions a method call needs that the code
  never imports (``env.render()`` draws with pygame).
* :data:`NOT_ON_PYPI` — imports whose PyPI namesake is a *different* project; the value is
  the requirement to use instead (a git URL).
* :data:`GOOGLE_SUBPACKAGES` — ``google.X`` -> distribution, None where nothing installs it.
* :data:`CONDA_TO_PYPI`, :data:`CONDA_NOT_PYTHON`, :data:`CONDA_SYSTEM`, :data:`CONDA_CUDA`,
  :data:`CONDA_GCC` — conda package names.
* :data:`DEBIAN_TO_NIX`, :data:`DEBIAN_SKIP` — apt package names -> nixpkgs attribute paths.
* :data:`PYTHON_SYSTEM_NEEDS` — Python distribution -> nixpkgs attributes it loads at run
  time, with a confidence (low where wheels usually bundle the library).

All distribution names are canonical (``packaging.utils.canonicalize_name``).
"""

from __future__ import annotations

from typing import Any, Final, Literal, cast

from reprobridge.data import load_packages

_DATA: Final = load_packages()


def _str_map(table: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in table.items()}


def _tuple_map(table: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    return {str(k): tuple(str(x) for x in v) for k, v in table.items()}


IMPORT_TO_DIST: Final[dict[str, str]] = _str_map(_DATA["imports"])
#: Import -> every distribution that provides it (the first is the one to install).
PROVIDERS: Final[dict[str, tuple[str, ...]]] = _tuple_map(_DATA["providers"])
#: Distribution-name prefixes that also provide an import (``cupy-cuda12x`` gives ``cupy``).
PROVIDER_PREFIXES: Final[dict[str, tuple[str, ...]]] = _tuple_map(_DATA["provider_prefixes"])
#: Dotted import path -> further distributions it needs (``torch.utils.tensorboard``).
SUBMODULE_DISTS: Final[dict[str, tuple[str, ...]]] = _tuple_map(_DATA["submodules"])
#: ``top:method`` -> (distributions a call of ``.method(`` needs in a file importing
#: ``top``, the ISO day of the first release of ``top`` that needs them or "").
CALL_DISTS: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    str(k): (tuple(str(d) for d in v["requires"]), str(v.get("since", "")))
    for k, v in _DATA["calls"].items()
}
#: ``import google.X`` -> distribution (``google`` is a namespace package of many projects).
GOOGLE_SUBPACKAGES: Final[dict[str, str | None]] = {
    **_str_map(_DATA["google"]),
    **dict.fromkeys(_DATA["google_nothing"]["names"]),
}
#: Imports whose PyPI namesake is another project: the requirement to use instead.
NOT_ON_PYPI: Final[dict[str, str]] = _str_map(_DATA["not_on_pypi"])
#: Placeholder requirement names on PyPI -> the distribution to install instead.
RENAMED_REQUIREMENTS: Final[dict[str, str]] = _str_map(_DATA["renamed_requirements"])
#: Imports that are third-party even where the repository has a folder of that name.
THIRD_PARTY: Final[frozenset[str]] = frozenset(_DATA["third_party"]["names"])
#: Python 2 standard-library modules still imported by old research code.
PY2_STDLIB: Final[frozenset[str]] = frozenset(_DATA["python2_stdlib"])

CONDA_TO_PYPI: Final[dict[str, str]] = _str_map(_DATA["conda"]["to_pypi"])
#: Conda packages that are neither Python distributions nor system libraries to add.
CONDA_NOT_PYTHON: Final[frozenset[str]] = frozenset(_DATA["conda"]["other"]["names"])
#: Conda packages whose version is the CUDA toolkit's.
CONDA_CUDA: Final[frozenset[str]] = frozenset(_DATA["conda"]["cuda"]["names"])
#: Conda packages whose version is gcc's.
CONDA_GCC: Final[frozenset[str]] = frozenset(_DATA["conda"]["gcc"]["names"])
#: Conda packages that are system tools/libraries -> nixpkgs attribute.
CONDA_SYSTEM: Final[dict[str, str]] = _str_map(_DATA["conda"]["system"])

DEBIAN_TO_NIX: Final[dict[str, str]] = _str_map(_DATA["debian"]["to_nix"])
#: apt packages that need no nixpkgs attribute (stdenv, apt machinery, system Python, CUDA).
DEBIAN_SKIP: Final[frozenset[str]] = frozenset(_DATA["debian"]["skip"]["names"])
#: Prefixes of apt packages skipped for the same reasons as :data:`DEBIAN_SKIP`.
DEBIAN_SKIP_PREFIXES: Final[tuple[str, ...]] = tuple(_DATA["debian"]["skip"]["prefixes"])

Need = tuple[tuple[str, ...], Literal["medium", "low"], str]

#: dist -> (nixpkgs attributes, confidence, why).
PYTHON_SYSTEM_NEEDS: Final[dict[str, Need]] = {
    str(dist): (
        tuple(str(a) for a in need["attrs"]),
        cast(Literal["medium", "low"], need["confidence"]),
        str(need["why"]),
    )
    for dist, need in _DATA["system_needs"].items()
}


#: torch minor -> its first release date (``YYYY-MM-DD``), oldest first.
PYTORCH_RELEASES: Final[dict[str, str]] = _str_map(_DATA["pytorch_releases"])


def submodule_dists(dotted: str) -> tuple[str, ...]:
    """Further distributions a dotted import path needs (its longest listed prefix's)."""
    parts = dotted.split(".")
    for end in range(len(parts), 1, -1):
        hit = SUBMODULE_DISTS.get(".".join(parts[:end]))
        if hit is not None:
            return hit
    return ()

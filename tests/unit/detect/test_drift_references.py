"""The removed-names table (data/api_drift.toml) and the references the drift detector finds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from reprobridge.data import API_DRIFT_FILE, load
from reprobridge.detect._pyast import import_map_of
from reprobridge.detect.findings import DriftValue
from reprobridge.detect.procedure import drift
from reprobridge.detect.procedure.drift import references, removals
from reprobridge.manifest.schema import AT_LEAST_PATTERN, DOTTED_NAME_PATTERN


def _refs(code: str) -> list[tuple[int, int, str, str, str]]:
    tree = ast.parse(code)
    return [
        (r.line, r.column, r.was, r.value, r.removal.name)
        for r in references(code, tree, import_map_of([tree]), "t.py", "t.py", None)
    ]


def test_the_shipped_table_has_the_shape_the_schema_accepts() -> None:
    table = removals()
    assert len(table) == len(load(API_DRIFT_FILE)["removed"]) >= 40
    for name, r in table.items():
        assert name == r.name
        assert re.fullmatch(DOTTED_NAME_PATTERN, r.name) and re.fullmatch(
            DOTTED_NAME_PATTERN, r.replacement
        )
        assert re.fullmatch(AT_LEAST_PATTERN, r.condition), r.condition  # becomes `when`
        assert r.source.startswith("https://")
        assert r.replacement != r.name
    # The removals the issue measured, with the versions their changelogs give.
    assert table["jax.tree_multimap"].removed_in == "0.3.16"
    assert table["jax.tree_map"].removed_in == "0.6.0"
    assert table["numpy.float"].replacement == "float"
    assert table["numpy.float"].removed_in == "1.24"
    assert table["numpy.NaN"].removed_in == "2.0"
    assert table["scipy.misc.comb"].removed_in == "1.3.0"
    assert table["sklearn.cross_validation"].distribution == "scikit-learn"
    # np.bool and np.long came back in numpy 2.0 with other meanings: not "removed" there.
    assert "numpy.long" not in table


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"distribution": "jax", "name": "jax.x", "removed_in": "1"}, "needs exactly"),
        (
            {
                "distribution": "jax",
                "name": "jax.x",
                "removed_in": "soon",
                "replacement": "jax.y",
                "source": "https://x",
            },
            "no version",
        ),
        (
            {
                "distribution": "jax",
                "name": "jax.x",
                "removed_in": "1",
                "replacement": "os.system('x')",
                "source": "https://x",
            },
            "not a dotted name",
        ),
        (
            {
                "distribution": "Scikit_Learn",
                "name": "sklearn.x",
                "removed_in": "1",
                "replacement": "sklearn.y",
                "source": "https://x",
            },
            "not canonical",
        ),
        (
            {
                "distribution": "matplotlib",
                "name": "matplotlib.axes.Axes.set_axis_bgcolor",
                "method": True,
                "removed_in": "2.2",
                "replacement": "matplotlib.figure.Figure.set_facecolor",
                "source": "https://x",
            },
            "same class",
        ),
        (
            {
                "distribution": "matplotlib",
                "name": "matplotlib.axes.Axes.set_axis_bgcolor",
                "method": "yes",
                "removed_in": "2.2",
                "replacement": "matplotlib.axes.Axes.set_facecolor",
                "source": "https://x",
            },
            "true or false",
        ),
    ],
)
def test_a_malformed_table_entry_is_named(
    monkeypatch: pytest.MonkeyPatch, entry: dict[str, str], message: str
) -> None:
    monkeypatch.setattr(drift, "load", lambda name: {"removed": [entry]})
    removals.cache_clear()
    try:
        with pytest.raises(ValueError, match=rf"api_drift.toml: removed\[0\]: .*{message}"):
            removals()
    finally:
        monkeypatch.undo()
        removals.cache_clear()


def test_method_entries_sharing_a_name_must_rename_it_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def entry(cls: str, new: str) -> dict[str, object]:
        return {
            "distribution": "pandas",
            "name": f"pandas.{cls}.iteritems",
            "method": True,
            "removed_in": "2.0",
            "replacement": f"pandas.{cls}.{new}",
            "source": "https://x",
        }

    monkeypatch.setattr(
        drift, "load", lambda name: {"removed": [entry("A", "items"), entry("B", "x")]}
    )
    removals.cache_clear()
    try:
        with pytest.raises(ValueError, match="share a name but not its package, release"):
            removals()
    finally:
        monkeypatch.undo()
        removals.cache_clear()


def test_a_method_entry_matches_by_name_on_objects_in_files_importing_its_package() -> None:
    plotting = (
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\n"
        "ax.set_axis_bgcolor('w')\n"
        "plt.gca().set_axis_bgcolor('k')\n"
        "(fig.axes[0]\n"
        "    .set_axis_bgcolor('k'))\n"  # placed on the attribute's own line
        "print(plt.legend().legendHandles)\n"
    )
    assert _refs(plotting) == [
        (3, 3, "set_axis_bgcolor", "set_facecolor", "matplotlib.axes.Axes.set_axis_bgcolor"),
        (4, 10, "set_axis_bgcolor", "set_facecolor", "matplotlib.axes.Axes.set_axis_bgcolor"),
        (6, 5, "set_axis_bgcolor", "set_facecolor", "matplotlib.axes.Axes.set_axis_bgcolor"),
        (7, 19, "legendHandles", "legend_handles", "matplotlib.legend.Legend.legendHandles"),
    ]
    # Spelled through a module the file imports, the name is the table's full name.
    assert _refs("import matplotlib as mpl\nmpl.axes.Axes.set_axis_bgcolor(ax, 'w')\n") == [
        (
            2,
            0,
            "mpl.axes.Axes.set_axis_bgcolor",
            "mpl.axes.Axes.set_facecolor",
            "matplotlib.axes.Axes.set_axis_bgcolor",
        ),
    ]
    # No matplotlib import: an object of the file's own, whatever its method's name.
    assert _refs("import numpy as np\ncanvas.set_axis_bgcolor('w')\n") == []
    # A name the file defines or assigns is its own, even where pandas is imported.
    own = (
        "import pandas as pd\n"
        "class Book:\n"
        "    def iteritems(self):\n"
        "        return []\n"
        "class Run:\n"
        "    def __init__(self):\n"
        "        self.is_monotonic = True\n"
        "print(Book().iteritems(), Run().is_monotonic)\n"
    )
    assert _refs(own) == []
    assert _refs("import pandas as pd\nfor k, v in pd.Series([1]).iteritems(): pass\n") == [
        (2, 27, "iteritems", "items", "pandas.DataFrame.iteritems")
    ]


def test_references_resolve_through_the_files_own_aliases() -> None:
    code = (
        "import numpy as np\n"
        "import jax\n"
        "from jax import tree_util as tu\n"
        "x = np.float(3) + np.NaN\n"
        "y = jax.tree_multimap(f, a, b)\n"
        "z = tu.tree_multimap(f, a)\n"
        "w = np.float64(1) + np.nan\n"  # names numpy still has
    )
    assert _refs(code) == [
        (4, 4, "np.float", "float", "numpy.float"),
        (4, 18, "np.NaN", "np.nan", "numpy.NaN"),
        (5, 4, "jax.tree_multimap", "jax.tree_util.tree_map", "jax.tree_multimap"),
        (6, 4, "tu.tree_multimap", "tu.tree_map", "jax.tree_util.tree_multimap"),
    ]


def test_a_name_not_bound_by_an_import_is_no_reference() -> None:
    code = "class np:\n    float = float\n\nx = np.float(1)\njax = object()\njax.tree_map\n"
    assert _refs(code) == []


def test_import_statements_of_removed_modules_are_edited_at_the_module() -> None:
    code = (
        "from sklearn.cross_validation import train_test_split\n"
        "import sklearn.externals.joblib as jl\n"
        "from jax.experimental import stax, optimizers\n"
        "from scipy.misc import comb, factorial\n"
    )
    assert _refs(code) == [
        (1, 5, "sklearn.cross_validation", "sklearn.model_selection", "sklearn.cross_validation"),
        (2, 7, "sklearn.externals.joblib", "joblib", "sklearn.externals.joblib"),
        (3, 5, "jax.experimental", "jax.example_libraries", "jax.experimental.stax"),
        (4, 5, "scipy.misc", "scipy.special", "scipy.misc.comb"),
    ]


def test_a_reference_no_name_edit_can_fix_is_reported_without_a_value() -> None:
    code = (
        "from jax import tree_multimap\n"  # would need `tree_map as tree_multimap`
        "from scipy.misc import comb, imread\n"  # imread has no replacement in scipy
        "from sklearn.externals import joblib\n"  # would need `import joblib`
        "import sklearn.externals.joblib\n"  # binds `sklearn`, the replacement does not
    )
    found = _refs(code)
    assert [(line, value) for line, _, _, value, _ in found] == [(1, ""), (2, ""), (3, ""), (4, "")]


def test_a_reference_split_over_lines_is_left_alone() -> None:
    code = "import jax\ny = (jax\n     .tree_multimap)(f, a)\n"
    assert _refs(code) == []


def test_references_come_in_source_order_and_are_typed() -> None:
    code = "import numpy as np\nb = np.bool\na = np.int\n"
    found = list(references(code, ast.parse(code), {"np": "numpy"}, "t.py", "m.py", None))
    assert all(isinstance(r, DriftValue) and (r.entry, r.file) == ("t.py", "m.py") for r in found)
    assert [(r.line, r.value) for r in found] == [(2, "bool"), (3, "int")]


def test_the_detector_reports_the_entry_and_the_modules_it_imports(tmp_path: Path) -> None:
    from reprobridge.detect import detect_repo
    from reprobridge.detect.findings import DriftValue, select
    from reprobridge.detect.index import RepoIndex

    (tmp_path / "README.md").write_text("```bash\npython train.py\n```\n")
    (tmp_path / "train.py").write_text(
        "import numpy as np\nfrom helpers import scale\n\nx = np.float(scale(2))\nprint('acc: 1')\n"
    )
    (tmp_path / "helpers.py").write_text("import numpy\n\n\ndef scale(v):\n    return numpy.NaN\n")
    (tmp_path / "unused.py").write_text("import numpy as np\ny = np.int\n")  # not imported

    found = select(detect_repo(RepoIndex.from_directory(tmp_path)).findings, DriftValue)

    assert sorted((f.key, f.value.file, f.value.was, f.value.value) for f in found) == [
        ("train.py->helpers.py::5:11", "helpers.py", "numpy.NaN", "numpy.nan"),
        ("train.py::4:4", "train.py", "np.float", "float"),
    ]
    assert all(f.value.entry == "train.py" for f in found)


def test_the_standard_librarys_removed_names_are_references_too() -> None:
    code = (
        "import time\n"
        "from collections import Mapping, Iterable\n"
        "from collections import OrderedDict, Sequence\n"  # OrderedDict stays: no edit
        "from fractions import gcd\n"
        "t0 = time.clock()\n"
    )
    assert _refs(code) == [
        (2, 5, "collections", "collections.abc", "collections.Mapping"),
        (3, 5, "collections", "", "collections.Sequence"),
        (4, 5, "fractions", "math", "fractions.gcd"),
        (5, 5, "time.clock", "time.perf_counter", "time.clock"),
    ]
    assert removals()["time.clock"].condition == "python>=3.8"


def test_a_keyword_entry_matches_calls_that_pass_it_by_name_or_through_a_dict() -> None:
    code = (
        "import seaborn as sns\n"
        "LOOK = {'cmap': 'viridis'}\n"
        "sns.scatterplot(x=a, y=b, hue=c, cmap='viridis')\n"
        "sns.scatterplot(x=a, y=b, hue=c, **LOOK)\n"
        "sns.lineplot(x=a, y=b, cmap='viridis')\n"  # not listed for lineplot
        "scatterplot(x=a, cmap='viridis')\n"  # not seaborn's
    )
    assert _refs(code) == [
        (3, 33, "cmap", "", "seaborn.scatterplot"),
        (4, 33, "**LOOK", "", "seaborn.scatterplot"),
    ]
    # `**kwargs` in a file that never spells the key: nothing says it carries one.
    assert _refs("import seaborn as sns\ndef f(**kw):\n    sns.scatterplot(x=1, **kw)\n") == []
    assert _refs("import seaborn as sns\nkw = dict(vmin=0)\nsns.scatterplot(x=1, **kw)\n") == [
        (3, 21, "**kw", "", "seaborn.scatterplot")
    ]
    (scatter,) = drift.keywords()["seaborn.scatterplot"][:1]
    assert (scatter.keyword, scatter.removed_in, scatter.replacement) == ("cmap", "0.13.0", "")


def test_an_assigned_entry_matches_self_assignments_in_a_subclass_only() -> None:
    """Issue 9, openai/grok: `self.hparams = hparams` in a LightningModule's __init__ fails
    from pytorch-lightning 1.3 ("can't set attribute"); the class is matched through the
    file's imports, under each path it is imported by."""
    code = (
        "import pytorch_lightning as pl\n"
        "from pytorch_lightning.core.lightning import LightningModule\n"
        "class A(pl.LightningModule):\n"
        "    def __init__(self, hparams):\n"
        "        super().__init__()\n"
        "        self.hparams = hparams  # type: ignore\n"
        "        self.hparams.lr = 1\n"  # an item of it, not the attribute: fine
        "        other.hparams = hparams\n"  # not self
        "class B(LightningModule):\n"
        "    def setup(self):\n"
        "        self.hparams: dict = {}\n"
        "class C:\n"
        "    def __init__(self):\n"
        "        self.hparams = 1\n"  # not a LightningModule
    )
    assert _refs(code) == [
        (6, 8, "self.hparams", "", "pytorch_lightning.LightningModule"),
        (11, 8, "self.hparams", "", "pytorch_lightning.core.lightning.LightningModule"),
    ]
    (entry,) = drift.assigned()["pytorch_lightning.LightningModule"]
    assert (entry.attribute, entry.removed_in, entry.distribution) == (
        "hparams",
        "1.3.0",
        "pytorch-lightning",
    )
    # A local class of the same name is not the library's.
    local = "class LightningModule: pass\nclass D(LightningModule):\n    def f(self):\n        self.hparams = 1\n"
    assert _refs(local) == []


def test_an_unpacked_entry_matches_the_old_number_of_names_in_a_file_that_imports_it() -> None:
    """Issue 9, rasbt/machine-learning-book ch19: `next_state, reward, done, _ =
    env.step(action)` (gym < 0.26) raises "too many values to unpack" on gym 0.26's five."""
    code = (
        "import gym\n"
        "env = gym.make('CartPole-v1')\n"
        "s, r, done, _ = env.step(0)\n"
        "[s, r, done, info] = self.env.step(0)\n"
        "s, r, term, trunc, info = env.step(0)\n"  # the new API: current
        "s, *rest = env.step(0)\n"  # starred: any length
        "result = env.step(0)\n"  # not unpacked
        "optimizer.step()\n"
    )
    assert _refs(code) == [
        (3, 0, "s, r, done, _", "", "gym.Env.step"),
        (4, 0, "[s, r, done, info]", "", "gym.Env.step"),
        (5, 0, "s, r, term, trunc, info", "", "gym.Env.step"),
    ]
    tree = ast.parse(code)
    refs = references(code, tree, import_map_of([tree]), "t.py", "t.py", None)
    assert [r.current for r in refs] == [False, False, True]
    # Without gym imported, `.step` is somebody else's.
    assert _refs("import torch\na, b, c, d = sched.step()\n") == []
    (entry,) = drift.unpacked()["step"]
    assert (entry.count, entry.removed_in, entry.distribution) == (4, "0.26.0", "gym")
    assert entry.what == "unpacking gym.Env.step() into 4 names fails"


_SCATTER = {
    "distribution": "seaborn",
    "name": "seaborn.scatterplot",
    "removed_in": "0.13.0",
    "source": "https://x",
}
_HPARAMS = {
    "distribution": "pytorch-lightning",
    "name": "pytorch_lightning.LightningModule",
    "attribute": "hparams",
    "removed_in": "1.3.0",
    "source": "https://x",
}
_STEP = {
    "distribution": "gym",
    "name": "gym.Env.step",
    "removed_in": "0.26.0",
    "source": "https://x",
}


@pytest.mark.parametrize(
    ("kind", "entries", "message"),
    [
        ("keyword", [{**_SCATTER, "keyword": "a.b"}], r"keyword\[0\]: keyword is not a name"),
        ("assigned", [{**_HPARAMS, "attribute": "h.p"}], r"assigned\[0\]: attribute is not a name"),
        (
            "assigned",
            [_HPARAMS, _HPARAMS],
            r"assigned\[1\]: .*LightningModule hparams is listed twice",
        ),
        *(
            (
                "unpacked",
                [{**_STEP, "count": count}],
                r"unpacked\[0\]: count must be a whole number",
            )
            for count in (1, True, "4", 2.5)
        ),
        (
            "unpacked",
            [{**_STEP, "count": 4, "count_since": 4}],
            r"unpacked\[0\]: count_since must differ",
        ),
        (
            "unpacked",
            [{**_STEP, "count": 4, "count_since": "5"}],
            r"unpacked\[0\]: count_since must be a whole number",
        ),
    ],
)
def test_a_malformed_entry_is_named(
    monkeypatch: pytest.MonkeyPatch, kind: str, entries: list[dict[str, object]], message: str
) -> None:
    reader = getattr(drift, {"keyword": "keywords"}.get(kind, kind))
    monkeypatch.setattr(drift, "load", lambda name: {kind: entries})
    reader.cache_clear()
    try:
        with pytest.raises(ValueError, match=message):
            reader()
    finally:
        monkeypatch.undo()
        reader.cache_clear()


def test_a_class_keyword_entry_matches_its_constructor_and_a_subclass_super_init() -> None:
    """Issue 9, self-paced-ensemble: a subclass of sklearn's BaseEnsemble passes
    `base_estimator` to `super(...).__init__`, which scikit-learn 1.4 refuses."""
    code = (
        "from sklearn.ensemble import BaseEnsemble, BaggingClassifier\n"
        "import sklearn.ensemble as ens\n"
        "class Mine(BaseEnsemble):\n"
        "    def __init__(self, base_estimator):\n"
        "        super(Mine, self).__init__(base_estimator=base_estimator)\n"
        "class Other(ens.BaseEnsemble):\n"
        "    def __init__(self, est):\n"
        "        super().__init__(estimator=est)\n"  # the new keyword: fine
        "        BaseEnsemble.__init__(self, base_estimator=est)\n"
        "clf = BaggingClassifier(base_estimator=None)\n"
        "class Plain:\n"
        "    def __init__(self):\n"
        "        super().__init__(base_estimator=1)\n"  # not sklearn's
    )
    assert _refs(code) == [
        (5, 35, "base_estimator", "", "sklearn.ensemble.BaseEnsemble"),
        (9, 36, "base_estimator", "", "sklearn.ensemble.BaseEnsemble"),
        (10, 24, "base_estimator", "", "sklearn.ensemble.BaggingClassifier"),
    ]

"""Datasets the experiments read: library datasets, download URLs, data paths, generated data.

``dataset`` findings, keyed by an id slugified from the dataset's name, with value keys
(each present only when known) ``name``, ``url``, ``path`` and ``generated``. ``name`` is
``<library>:<dataset>``:

* ``torchvision:CIFAR10`` (also torchaudio, torchtext, torch_geometric): a dataset class
  call; its ``root=`` literal is the ``path``. ``ImageFolder(root)`` is a path dataset;
  ``FakeData`` is generated.
* ``huggingface:glue/sst2`` from ``load_dataset("glue", "sst2")``; ``load_dataset("csv",
  data_files="data/x.csv")`` is a path dataset.
* ``tfds:mnist`` from ``tfds.load``/``tfds.builder``; ``keras:mnist`` from
  ``keras.datasets.mnist.load_data()``; ``sklearn:iris`` from ``load_iris()``/``fetch_*``;
  ``openml:<name>`` from ``fetch_openml``.
* Generated: ``sklearn.datasets.make_*`` calls (``generated = true``), and random arrays
  written (``np.save``/``savetxt``/``to_csv``/``torch.save``) to a literal path by a file
  that draws random numbers.
* URLs (in Python sources, README/docs, shell scripts and configs, with their line):
  ``http(s)`` links to data files (``.zip``, ``.tar.gz``, ``.tgz``, ``.npz``, ``.csv``,
  ``.h5``, ``.pt``, ...) or to data hosts (Zenodo, figshare, Google Drive, Hugging Face
  datasets, Kaggle, OSF, UCI). Code archives, package indexes and badges are not data.
* Paths: ``data/...``/``datasets/...`` string literals in Python, and the literal default of
  a ``--data_dir``-like flag.

Findings with the same id are merged (fields and evidence). Library calls are high
confidence, URLs and flag defaults medium, bare path literals low.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import urlparse

from reprobridge.detect._pyast import (
    call_name,
    import_map,
    kwarg,
    literal,
    nodes_of,
    static_path,
    str_arg,
)
from reprobridge.detect._select import procedure_files
from reprobridge.detect._text import skip_path, slugify, tidy_path
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding, rank_of
from reprobridge.detect.findings import DatasetValue
from reprobridge.detect.procedure._cli_params import argparse_params
from reprobridge.detect.procedure.configs import is_config_path

_LIB_MODULES = frozenset(
    {
        "torchvision",
        "torchaudio",
        "torchtext",
        "torch_geometric",
        "tensorflow_datasets",
        "keras",
        "tensorflow",
        "sklearn",
        "datasets",
        "ogb",
    }
)
_CLASS_LIBS = (
    "torchvision.datasets.",
    "torchaudio.datasets.",
    "torchtext.datasets.",
    "torch_geometric.datasets.",
)
_FOLDER_CLASSES = frozenset({"ImageFolder", "DatasetFolder", "VisionDataset"})
_GENERATED_CLASSES = frozenset({"FakeData"})
_HF_BUILDERS = frozenset(
    {"csv", "json", "parquet", "text", "imagefolder", "audiofolder", "arrow", "pandas"}
)
_SAVE_CALLS = frozenset(
    {"numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "torch.save"}
)
_RANDOM_PREFIXES = ("numpy.random.", "torch.rand", "random.", "torch.normal", "jax.random.")
_URL_RE = re.compile(r"https?://[^\s\"'<>)\]`]+")
_HTTP_RE = re.compile(rb"https?://")
#: Bytes of a Python file that may load, write or name data.
_CANDIDATE_RE = re.compile(
    rb"load_dataset|add_argument|np\.save|to_csv|savetxt|torch\.save|[\"'](?:\./)?datasets?/"
)
_DATA_EXT_RE = re.compile(
    r"\.(?:zip|tar\.gz|tgz|tar|tar\.bz2|tar\.xz|gz|bz2|xz|7z|npz|npy|csv|tsv|h5|hdf5|pt|pth|"
    r"pkl|pickle|parquet|jsonl|mat|arff|feather)$",
    re.I,
)
_WEIGHT_EXT_RE = re.compile(r"\.(?:pt|pth|ckpt|bin|safetensors)$", re.I)
_DATA_HOSTS = (
    "zenodo.org",
    "figshare.com",
    "drive.google.com",
    "kaggle.com",
    "osf.io",
    "archive.ics.uci.edu",
    "dataverse",
    "data.mendeley.com",
    "physionet.org",
)
_NOT_DATA_HOSTS = (
    "pypi.org",
    "files.pythonhosted.org",
    "download.pytorch.org",
    "anaconda.org",
    "shields.io",
    "badge",
    "arxiv.org",
    "conda.anaconda.org",
    "developer.nvidia.com",
    "developer.download.nvidia.com",
)
_DATA_DIR_FLAG_RE = re.compile(
    r"^(?:data|dataset|datasets)(?:_?(?:dir|path|root|folder|file))?$", re.I
)
_DATA_PREFIXES = ("data/", "datasets/", "dataset/")
_ARCHIVE_EXT_RE = re.compile(
    r"(?:\.(?:tar|gz|tgz|zip|bz2|xz|7z|npz|npy|csv|tsv|h5|hdf5|pt|pth|pkl|parquet|jsonl|mat))+$",
    re.I,
)


@dataclass
class _Found:
    value: DatasetValue
    evidence: list[Evidence]
    confidence: Confidence
    notes: list[str] = field(default_factory=list)


def _dataset_path(path: str) -> str | None:
    """A dataset's path literal, tidied (:func:`~reprobridge.detect._text.tidy_path`); None
    when it cannot name a place in the run's tree: absolute, in a home, from a variable,
    above the root, several lines, or with a blank (prose rather than a path)."""
    path = tidy_path(path)
    if not path or path.startswith(("/", "~", "$", "..")) or "\n" in path or " " in path:
        return None
    return path


class _Collector:
    def __init__(self) -> None:
        self.found: dict[str, _Found] = {}

    def add(
        self,
        ident: str | None,
        value: DatasetValue,
        ev: Evidence,
        conf: Confidence,
        note: str = "",
    ) -> None:
        if ident is None:
            return
        cur = self.found.get(ident)
        if cur is None:
            self.found[ident] = _Found(value, [ev], conf, [note] if note else [])
            return
        cur.value = cur.value.filled_from(value)
        if ev not in cur.evidence and len(cur.evidence) < 5:
            cur.evidence.append(ev)
        if rank_of(conf) < rank_of(cur.confidence):
            cur.confidence = conf
        if note and note not in cur.notes:
            cur.notes.append(note)

    def add_path(
        self, path: str, ev: Evidence, conf: Confidence, note: str, *, generated: bool = False
    ) -> None:
        """The dataset at data path ``path``, grouped by :func:`path_dataset`."""
        ident, ds_path = path_dataset(path)
        self.add(ident, DatasetValue(path=ds_path, generated=generated), ev, conf, note)


def url_dataset(url: str) -> tuple[str | None, DatasetValue, str] | None:
    """(id, value, note) of a data URL, or None when the URL is not a dataset download."""
    url = url.rstrip(".,;:)]}'\"")
    try:
        parsed = urlparse(url)
    except ValueError:  # "http://[bad" and friends: not a link anybody downloads from
        return None
    host = parsed.netloc.lower()
    path = parsed.path
    if not host or any(bad in host for bad in _NOT_DATA_HOSTS):
        return None
    if "github.com" in host and "/archive/" in path:
        return None  # a code archive, not data
    value = DatasetValue(url=url)
    if host.endswith("huggingface.co") and path.startswith("/datasets/"):
        parts = [p for p in path.split("/")[2:4] if p]
        if not parts:
            return None
        return slugify(parts[-1]), DatasetValue(url=url, name="huggingface:" + "/".join(parts)), ""
    stem = PurePosixPath(path).name
    if "zenodo.org" in host:
        record = re.search(r"/records?/(\d+)", path)
        if _DATA_EXT_RE.search(stem):
            return slugify(_ARCHIVE_EXT_RE.sub("", stem)), value, ""
        return (slugify(f"zenodo-{record.group(1)}") if record else None), value, ""
    if "drive.google.com" in host:
        ident = re.search(r"(?:/d/|id=)([\w-]{6,})", url)
        return (
            (slugify(f"gdrive-{ident.group(1)[:12]}") if ident else None),
            value,
            "Google Drive link",
        )
    if "figshare.com" in host:
        ident = re.search(r"/(?:files|articles)/(?:[^/]+/)?(\d+)", path)
        return (slugify(f"figshare-{ident.group(1)}") if ident else None), value, ""
    if _DATA_EXT_RE.search(stem) or any(h in host for h in _DATA_HOSTS):
        base = _ARCHIVE_EXT_RE.sub("", stem) or host.split(".")[0]
        note = "may be model weights" if _WEIGHT_EXT_RE.search(stem) else ""
        return slugify(base), value, note
    return None


def path_dataset(path: str) -> tuple[str | None, str]:
    """(id, dataset path) of a data path: ``data/cifar10/train.csv`` -> (cifar10, data/cifar10)."""
    parts = path.split("/")
    if len(parts) >= 3:
        return slugify(parts[1]), "/".join(parts[:2])
    name = _ARCHIVE_EXT_RE.sub("", parts[-1]) or parts[-1]
    return slugify(PurePosixPath(name).stem if "." in name else name), path


class DatasetsDetector(Detector):
    """Library datasets, data URLs, data paths and generated data (see module docstring)."""

    name = "datasets"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        index = ctx.index
        col = _Collector()
        scan = index.py_scan()
        # Only files that load, write or name data are parsed, and only among the files the
        # experiments run (their entry points and what those import).
        libs = {p for p, info in scan.items() if info.imports & _LIB_MODULES}
        paths = sorted(procedure_files(ctx, _CANDIDATE_RE, self.name, matched=libs))
        for path, tree in ctx.python_trees(paths):
            with ctx.skip_too_deep(path):
                self._python(path, tree, col)
        # URLs: in the documentation, scripts and configs, and in the same Python files.
        url_py = procedure_files(ctx, _HTTP_RE, self.name)
        for path in sorted([*self._text_files(ctx), *url_py]):
            text = index.try_read_text(path, limit=1024 * 1024)
            if text is None or "http" not in text:
                continue
            number, counted = 1, 0
            for match in _URL_RE.finditer(text):
                hit = url_dataset(match.group(0))
                if hit is not None:
                    ident, value, note = hit
                    number += text.count("\n", counted, match.start())
                    counted = match.start()
                    col.add(ident, value, Evidence(path, number), "medium", note)
        return [
            Finding(
                kind="dataset",
                key=ident,
                value=found.value,
                evidence=tuple(found.evidence),
                detector=self.name,
                confidence=found.confidence,
                note="; ".join(found.notes),
            )
            for ident, found in col.found.items()
        ]

    def _text_files(self, ctx: DetectContext) -> list[str]:
        """README/docs, shell scripts and configs (Python files are chosen separately)."""
        out: list[str] = []
        for entry in ctx.index.files:
            path = entry.path
            if skip_path(path) or entry.suffix == ".py":
                continue
            name = entry.name.lower()
            if (
                (name.startswith("readme") and entry.suffix in {".md", ".rst", ".txt", ""})
                or (path.startswith(("docs/", "doc/")) and entry.suffix in {".md", ".rst"})
                or entry.suffix == ".sh"
                or is_config_path(path)
            ):
                out.append(path)
        return out

    def _python(self, path: str, tree: ast.Module, col: _Collector) -> None:
        imports = import_map(tree)
        randomness = False
        saves: list[tuple[ast.Call, str]] = []
        for node in nodes_of(tree, ast.Call):
            if not isinstance(node, ast.Call):
                continue
            name = call_name(node, imports)
            if name is None:
                continue
            if name.startswith(_RANDOM_PREFIXES) or ".random." in name:
                randomness = True
            ev = Evidence(path, node.lineno)
            if name.startswith(_CLASS_LIBS):
                self._class_dataset(name, node, imports, ev, col)
            elif name == "datasets.load_dataset":
                self._hf(node, imports, ev, col)
            elif name in {
                "tensorflow_datasets.load",
                "tensorflow_datasets.builder",
                "tensorflow_datasets.data_source",
            }:
                ds = str_arg(node, 0, "name")
                if ds:
                    col.add(
                        slugify(ds.split(":")[0].split("/")[0]),
                        DatasetValue(name=f"tfds:{ds}"),
                        ev,
                        "high",
                    )
            elif ".datasets." in f".{name}" and name.rsplit(".", 1)[-1] == "load_data":
                parts = name.split(".")
                ds = parts[-2] if len(parts) >= 3 and parts[-3] == "datasets" else None
                if ds:
                    col.add(slugify(ds), DatasetValue(name=f"keras:{ds}"), ev, "high")
            elif name.startswith("sklearn.datasets."):
                self._sklearn(name.rsplit(".", 1)[-1], node, ev, col)
            elif name in _SAVE_CALLS or name.rsplit(".", 1)[-1] in {"to_csv", "savetxt"}:
                target = (
                    node.args[1]
                    if name == "torch.save" and len(node.args) > 1
                    else (node.args[0] if node.args else None)
                )
                where = static_path(target, imports) if target is not None else None
                if where is not None and not where[1]:
                    saves.append((node, where[0]))
        stem = PurePosixPath(path).stem.lower()
        generator_file = bool(re.search(r"generat|synth|make_data|simulat|toy", stem))
        if randomness:
            for node, saved in saves:
                norm = _dataset_path(saved)
                if norm and (norm.startswith(_DATA_PREFIXES) or generator_file):
                    col.add_path(
                        norm,
                        Evidence(path, node.lineno),
                        "medium",
                        f"random data written by {path}",
                        generated=True,
                    )
        self._paths(path, tree, imports, col)

    def _class_dataset(
        self, name: str, node: ast.Call, imports: dict[str, str], ev: Evidence, col: _Collector
    ) -> None:
        lib, cls = name.split(".", 1)[0], name.rsplit(".", 1)[-1]
        if not cls[:1].isupper():
            return
        root_node = kwarg(node, "root") or (node.args[0] if node.args else None)
        where = static_path(root_node, imports) if root_node is not None else None
        root = _dataset_path(where[0]) if where else None
        if cls in _FOLDER_CLASSES:
            if root:
                ident, _ = path_dataset(root)
                col.add(ident, DatasetValue(path=root), ev, "high", f"{cls} over a local directory")
            return
        sub = str_arg(node, 1, "name") if lib == "torch_geometric" else None
        ident = slugify(sub) if sub else slugify(cls)
        value = DatasetValue(
            path=root or None,
            name=f"{lib}:{cls}/{sub}" if sub else f"{lib}:{cls}",
            generated=cls in _GENERATED_CLASSES,
        )
        download = literal(kwarg(node, "download")) is True
        col.add(
            ident, value, ev, "high", "downloaded by the code (needs network)" if download else ""
        )

    def _hf(self, node: ast.Call, imports: dict[str, str], ev: Evidence, col: _Collector) -> None:
        ds = str_arg(node, 0, "path")
        if not ds:
            return
        if ds in _HF_BUILDERS:
            files = kwarg(node, "data_files")
            candidates: list[ast.expr] = []
            if isinstance(files, ast.Dict):
                candidates = [v for v in files.values if v is not None]
            elif isinstance(files, ast.List | ast.Tuple):
                candidates = list(files.elts)
            elif files is not None:
                candidates = [files]
            for cand in candidates:
                where = static_path(cand, imports)
                norm = _dataset_path(where[0]) if where else None
                if norm:
                    col.add_path(norm, ev, "high", f"read with load_dataset({ds!r})")
            return
        config = str_arg(node, 1, "name")
        full = f"{ds}/{config}" if config else ds
        base = ds.rsplit("/", 1)[-1]
        col.add(
            slugify(f"{base}-{config}" if config else base),
            DatasetValue(name=f"huggingface:{full}"),
            ev,
            "high",
            "downloaded from the Hugging Face Hub (needs network or a cache)",
        )

    def _sklearn(self, func: str, node: ast.Call, ev: Evidence, col: _Collector) -> None:
        if func.startswith("make_"):
            col.add(slugify(func), DatasetValue(name=f"sklearn:{func}", generated=True), ev, "high")
        elif func == "fetch_openml":
            ds = str_arg(node, 0, "name")
            if ds:
                col.add(
                    slugify(ds),
                    DatasetValue(name=f"openml:{ds}"),
                    ev,
                    "high",
                    "downloaded from OpenML",
                )
        elif func.startswith(("load_", "fetch_")) and func not in {
            "load_files",
            "load_svmlight_file",
            "load_svmlight_files",
        }:
            ds = func.split("_", 1)[1]
            note = (
                "downloaded by scikit-learn"
                if func.startswith("fetch_")
                else "bundled with scikit-learn"
            )
            col.add(slugify(ds), DatasetValue(name=f"sklearn:{ds}"), ev, "high", note)

    def _paths(self, path: str, tree: ast.Module, imports: dict[str, str], col: _Collector) -> None:
        for param in argparse_params(tree, imports):
            # A `--data` flag with `choices=[...]` picks one of the code's own datasets by
            # name (`--data pinwheel` of toy densities it generates), not a path to read.
            if (
                _DATA_DIR_FLAG_RE.match(param.name)
                and isinstance(param.default, str)
                and not param.choices
            ):
                norm = _dataset_path(param.default)
                if norm:
                    col.add_path(
                        norm,
                        Evidence(path, param.line),
                        "medium",
                        f"default of {param.flag or param.name}",
                    )
        for node in nodes_of(tree, ast.Constant):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            text = node.value
            if len(text) > 200 or not text.lstrip("./").startswith(_DATA_PREFIXES):
                continue
            text = re.split(r"[{%*]", text, maxsplit=1)[0]
            norm = _dataset_path(text)
            if not norm or norm.endswith(".py") or "/" not in norm:
                continue
            col.add_path(norm, Evidence(path, node.lineno), "low", "path literal in the code")

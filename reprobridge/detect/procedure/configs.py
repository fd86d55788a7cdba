"""Hyperparameters and seeds written in config files (``configs/cifar10.yaml``).

Reads YAML, JSON and TOML files under a ``configs/``, ``config/``, ``conf/`` or ``cfgs/``
directory (at any depth, outside vendored directories; at most 1 MB each). Nested keys are
flattened (``optimizer.lr``); a scalar whose leaf key looks like a hyperparameter
(learning rate, batch size, epochs, steps, seed, weight decay, dropout, ...) becomes a
``param`` finding with ``entry`` = the config path, ``name`` = the dotted key with ``_``
for ``.``, ``flag`` None (how the value reaches the code is the entry point's business)
and high confidence. A seed-like key with an integer value becomes a ``seed`` finding.

Configs are incidental sources: a file that does not parse is ``ctx.warn``-ed and skipped,
never fatal. Evidence lines are found by searching for the leaf key in the text.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import PurePosixPath
from typing import Any

from reprobridge.detect._text import key_line, param_name, skip_path
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import ParamValue, SeedValue
from reprobridge.detect.procedure._hydra import flatten
from reprobridge.detect.procedure._param import SEED_NAMES, type_of

_CONFIG_DIRS = frozenset({"configs", "config", "conf", "cfgs", "cfg"})
_SUFFIXES = frozenset({".yaml", ".yml", ".json", ".toml"})
_MAX_BYTES = 1024 * 1024
_HYPER_RE = re.compile(
    r"(?:^|_)(?:lr|learning_rate|base_lr|max_lr|min_lr|batch_size|bs|train_batch_size|"
    r"eval_batch_size|micro_batch_size|epochs?|num_epochs|max_epochs|n_epochs|steps?|"
    r"max_steps|num_steps|total_steps|train_steps|warmup(?:_steps|_epochs|_ratio)?|iters?|"
    r"max_iters?|num_iters?|iterations|seed|random_seed|weight_decay|wd|momentum|dropout|"
    r"drop_rate|drop_path(?:_rate)?|label_smoothing|grad_clip|clip_grad(?:_norm)?|max_grad_norm|"
    r"gradient_accumulation_steps|accum_steps|hidden_size|hidden_dim|embed_dim|d_model|"
    r"num_layers|n_layers|depth|num_heads|n_heads|heads|width|beta1|beta2|betas|eps|epsilon|"
    r"gamma|temperature|tau|alpha|lambda|optimizer|scheduler|lr_scheduler|lr_decay|decay|"
    r"num_workers|image_size|img_size|resolution|patch_size|max_length|max_seq_len|"
    r"seq_len|context_length|vocab_size|num_classes|latent_dim|n_samples|num_samples|"
    r"timesteps|diffusion_steps|ema_decay|model|arch|backbone|dataset)$",
    re.I,
)


def is_config_path(path: str) -> bool:
    """True for a YAML/JSON/TOML file under a configs/config/conf/cfgs directory."""
    pure = PurePosixPath(path)
    return pure.suffix.lower() in _SUFFIXES and any(
        p.lower() in _CONFIG_DIRS for p in pure.parts[:-1]
    )


class _YamlError(ValueError):
    """A YAML config that does not parse (yaml's own error, whose module loads lazily)."""


def _parse(path: str, text: str) -> Any:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix == ".json":
        return json.loads(text)
    if suffix == ".toml":
        return tomllib.loads(text)
    import yaml  # loaded only when a repository has YAML configs (~20 ms of a small `rb init`)

    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise _YamlError(str(exc)) from exc
    return docs[0] if len(docs) == 1 else {} if not docs else _merge(docs)


def _merge(docs: list[Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for doc in docs:
        if isinstance(doc, dict):
            merged.update(doc)
    return merged


class ConfigsDetector(Detector):
    """Hyperparameters and seeds from config files (see module docstring)."""

    name = "configs"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        for entry in ctx.index.files:
            path = entry.path
            if not is_config_path(path) or skip_path(path):
                continue
            if entry.size > _MAX_BYTES:
                ctx.warn(f"skipped config: {entry.size / 1e6:.1f} MB is above the 1 MB limit", path)
                continue
            text = ctx.index.try_read_text(path, limit=_MAX_BYTES)
            if text is None:
                ctx.warn("skipped config: not readable as text (binary or unsafe)", path)
                continue
            try:
                data = _parse(path, text)
            except (
                _YamlError,
                json.JSONDecodeError,
                tomllib.TOMLDecodeError,
                RecursionError,
            ) as exc:
                ctx.warn(f"skipped config: does not parse ({_one_line(exc)})", path)
                continue
            findings.extend(self._config(path, text, data))
        return findings

    def _config(self, path: str, text: str, data: Any) -> list[Finding]:
        lines = text.splitlines()
        findings: list[Finding] = []
        seed: Finding | None = None
        seen: set[str] = set()
        for key, value in flatten(data):
            leaf = key.rsplit(".", 1)[-1]
            if not _HYPER_RE.search(leaf):
                continue
            name = param_name(key.replace(".", "_").replace("-", "_"))
            if name is None or name in seen:
                continue
            seen.add(name)
            evidence = (Evidence(path, key_line(lines, key)),)
            note = ""
            default = value
            if isinstance(value, str) and "${" in value:
                default, note = None, f"interpolated: {value}"
            findings.append(
                Finding(
                    kind="param",
                    key=f"{path}::{name}",
                    value=ParamValue(path, name, None, default, type_of(default)),
                    evidence=evidence,
                    detector=self.name,
                    confidence="high",
                    note=note,
                )
            )
            is_int = isinstance(value, int) and not isinstance(value, bool)
            if seed is None and leaf.lower() in SEED_NAMES and is_int:
                seed = Finding(
                    kind="seed",
                    key=path,
                    value=SeedValue(path, None, value),
                    evidence=evidence,
                    detector=self.name,
                    confidence="high",
                    note=f"config key {key}",
                )
        if seed is not None:
            findings.append(seed)
        return findings


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]

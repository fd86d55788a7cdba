"""ConfigsDetector: hyperparameters in configs/, malformed files are warnings."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure.configs import is_config_path
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"configs"}))


def test_config_paths() -> None:
    assert is_config_path("configs/a.yaml")
    assert is_config_path("src/conf/model/x.yml")
    assert is_config_path("config/a.toml")
    assert not is_config_path("a.yaml")
    assert not is_config_path("configs/a.py")


def test_malformed_and_huge_configs_warn(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "configs/bad.yaml": "lr: [0.1\nbatch_size: 3\n",
            "configs/bad.json": '{"lr": 0.1,}',
            "configs/bad.toml": "lr = = 1",
            "configs/tags.yaml": "lr: !!python/object:os.system 1\n",
            "configs/big.yaml": "lr: 0.1\n" + "#" * (1024 * 1024 + 10),
            "configs/bin.yaml": b"\x00lr: 1",
            "configs/ok.yaml": "lr: 0.1\n",
        },
    )
    assert [f.key for f in ctx.findings] == ["configs/ok.yaml::lr"]
    assert len(ctx.warnings) == 6


def test_multi_document_yaml_interpolation_and_filters(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "configs/a.yaml": "---\nlr: 0.1\n---\nepochs: 3\nname: x\n",
            "configs/b.yaml": "train:\n  lr: ${base.lr}\n  batch_size: 32\n  seed: true\n  layers: [1, 2]\n",
            "configs/empty.yaml": "",
            "configs/list.yaml": "- 1\n- 2\n",
        },
    )
    params = {f.key: f for f in ctx.findings if f.kind == "param"}
    assert set(params) == {
        "configs/a.yaml::lr",
        "configs/a.yaml::epochs",
        "configs/b.yaml::train_lr",
        "configs/b.yaml::train_batch_size",
        "configs/b.yaml::train_seed",
    }
    assert params["configs/b.yaml::train_lr"].value.default is None
    assert "interpolated" in params["configs/b.yaml::train_lr"].note
    # a boolean "seed" is not a seed value
    assert [f for f in ctx.findings if f.kind == "seed"] == []
    assert ctx.warnings == []

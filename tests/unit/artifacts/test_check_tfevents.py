"""TensorBoard event files as metric sources (check.py): the last value of a scalar tag.

The files are written here byte by byte from the format's specification — TFRecord
framing (little-endian uint64 length, masked CRC32C of it, the record, masked CRC32C of
it) around ``tensorflow.Event`` protobufs — because neither TensorFlow nor tensorboard is
a dependency of rb or its tests. Both scalar encodings writers use are covered:
``Summary.Value.simple_value`` (PyTorch's SummaryWriter, TF1) and a float/double
``tensor`` (TF2's ``tf.summary.scalar``).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from reprobridge.artifacts import check
from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.recovery.merge import merge_findings

# -- a writer, from the specification ------------------------------------------------------


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> bytes:
    crc = _crc32c(data)
    return struct.pack("<I", ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    key = _varint(number << 3 | wire)
    return key + (_varint(len(payload)) + payload if wire == 2 else payload)


def simple_value(tag: str, value: float) -> bytes:
    return _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", value))


def tensor_value(tag: str, value: float, *, double: bool = False) -> bytes:
    if double:
        tensor = _field(1, 0, _varint(2)) + _field(4, 2, struct.pack("<d", value))
    else:  # float_val, packed
        tensor = _field(1, 0, _varint(1)) + _field(5, 2, struct.pack("<f", value))
    return _field(1, 2, tag.encode()) + _field(8, 2, tensor)


def event(step: int, *values: bytes) -> bytes:
    summary = b"".join(_field(1, 2, v) for v in values)
    return (
        _field(1, 1, struct.pack("<d", 1.7e9 + step))
        + _field(2, 0, _varint(step))
        + _field(5, 2, summary)
    )


def record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + _masked(length) + data + _masked(data)


def write_events(path: Path, events: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    version = _field(1, 1, struct.pack("<d", 1.7e9)) + _field(3, 2, b"brain.Event:2")
    path.write_bytes(b"".join(record(e) for e in [version, *events]))
    return path


def read(workdir: Path, file: str, tag: str) -> float:
    return check.extract_metric({"file": file, "key": tag}, "", str(workdir))


# -- tests ---------------------------------------------------------------------------------


def test_the_last_value_of_the_tag_is_read(tmp_path: Path) -> None:
    write_events(
        tmp_path / "runs/demo/events.out.tfevents.1700000000.host.1.0",
        [
            event(0, simple_value("test/loss", 0.9), simple_value("lr", 0.1)),
            event(1, simple_value("train/loss", 0.7)),
            event(2, simple_value("test/loss", 0.25)),
        ],
    )
    assert read(tmp_path, "runs/demo", "test/loss") == 0.25
    assert read(tmp_path, "runs", "lr") == pytest.approx(0.1)  # directories are searched
    event_file = "runs/demo/events.out.tfevents.1700000000.host.1.0"
    assert read(tmp_path, event_file, "train/loss") == pytest.approx(0.7)


def test_tf2_tensor_scalars(tmp_path: Path) -> None:
    write_events(
        tmp_path / "logs/events.out.tfevents.1.h",
        [event(0, tensor_value("acc", 0.5)), event(1, tensor_value("acc", 0.875, double=True))],
    )
    assert read(tmp_path, "logs", "acc") == 0.875


def test_later_files_win_and_a_truncated_record_ends_a_file(tmp_path: Path) -> None:
    first = write_events(
        tmp_path / "runs/a/events.out.tfevents.1.h", [event(0, simple_value("loss", 2.0))]
    )
    second = write_events(
        tmp_path / "runs/b/events.out.tfevents.2.h", [event(5, simple_value("loss", 1.5))]
    )
    assert read(tmp_path, "runs", "loss") == 1.5
    # A run killed while writing leaves half a record: it is ignored, not an error.
    cut = record(event(6, simple_value("loss", 1.0)))[:-7]
    second.write_bytes(second.read_bytes() + cut)
    assert read(tmp_path, "runs", "loss") == 1.5
    assert first.exists()


def test_missing_tag_or_files_and_non_finite_values_fail(tmp_path: Path) -> None:
    write_events(tmp_path / "runs/events.out.tfevents.1.h", [event(0, simple_value("loss", 1.0))])
    with pytest.raises(check.MetricMissing, match="no scalar tagged 'acc'"):
        read(tmp_path, "runs", "acc")
    (tmp_path / "empty").mkdir()
    with pytest.raises(check.MetricMissing, match="no TensorBoard event file"):
        read(tmp_path, "empty", "loss")
    write_events(
        tmp_path / "nan/events.out.tfevents.1.h", [event(0, simple_value("loss", float("nan")))]
    )
    with pytest.raises(check.MetricInvalid):
        read(tmp_path, "nan", "loss")


def test_a_symlinked_event_file_is_not_followed(tmp_path: Path) -> None:
    outside = write_events(
        tmp_path / "outside/events.out.tfevents.1.h", [event(0, simple_value("loss", 9.0))]
    )
    (tmp_path / "work/runs").mkdir(parents=True)
    (tmp_path / "work/runs/events.out.tfevents.2.h").symlink_to(outside)
    with pytest.raises(check.MetricMissing):
        read(tmp_path / "work", "runs", "loss")


# -- recovery: SummaryWriter's directory and add_scalar's tag become the source --------------


def _merged(make_repo, src: str):  # type: ignore[no-untyped-def]
    root = make_repo({"train.py": src}, git=False)
    return merge_findings(detect_repo(RepoIndex.from_directory(root)), repo_name="r")


TRAIN = (
    "import argparse\n"
    "from torch.utils.tensorboard import SummaryWriter\n"
    "import wandb\n"
    "if __name__ == '__main__':\n"
    "    p = argparse.ArgumentParser()\n"
    "    p.add_argument('--epochs', type=int, default=3)\n"
    "    args = p.parse_args()\n"
    "    writer = SummaryWriter({logdir})\n"
    "    for e in range(args.epochs):\n"
    "        writer.add_scalar('val/acc', 0.5, e)\n"
    "        wandb.log({{'test_f1': 0.4}})\n"
)


def test_tensorboard_scalars_become_file_sources(make_repo) -> None:  # type: ignore[no-untyped-def]
    merged = _merged(make_repo, TRAIN.format(logdir="'runs/exp1'"))
    (exp,) = merged.manifest.experiments.values()
    source = exp.metrics["val_acc"].source
    assert (source.file, source.key) == ("runs/exp1", "val/acc")
    assert any("not read: test_f1 (wandb" in w for w in merged.notes.warnings), (
        merged.notes.warnings
    )
    # No directory given: the writer makes runs/<date>_<host>, so `runs` is searched.
    merged = _merged(make_repo, TRAIN.format(logdir=""))
    (exp,) = merged.manifest.experiments.values()
    assert exp.metrics["val_acc"].source.file == "runs"


def test_only_wandb_says_no_metric_could_be_read(make_repo) -> None:  # type: ignore[no-untyped-def]
    src = TRAIN.format(logdir="'runs'").replace(
        "        writer.add_scalar('val/acc', 0.5, e)\n", ""
    )
    merged = _merged(make_repo, src)
    (exp,) = merged.manifest.experiments.values()
    assert exp.metrics == {}
    assert any("no metric could be read" in w and "test_f1" in w for w in merged.notes.warnings)

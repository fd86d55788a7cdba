"""The shipped data files: each loads, once, and holds the mappings rb relies on."""

from __future__ import annotations

from reprobridge import data
from reprobridge.agent.ledger import price_for
from reprobridge.detect._pkgmap import CONDA_TO_PYPI, IMPORT_TO_DIST


def test_every_data_file_loads_and_is_read_once() -> None:
    for name in (data.PINS_FILE, data.PACKAGES_FILE, data.IO_CALLS_FILE, data.PRICES_FILE):
        assert data.load(name), name
        assert data.load(name) is data.load(name)  # cached: one parse per process


def test_a_few_mappings_hold() -> None:
    assert IMPORT_TO_DIST["cv2"] == "opencv-python"
    assert IMPORT_TO_DIST["sklearn"] == "scikit-learn"
    assert CONDA_TO_PYPI["pytorch"] == "torch"
    assert "release" in data.load_pins()
    price = price_for("claude-sonnet-4-5")
    assert price is not None and price.input > 0

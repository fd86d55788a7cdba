"""The typed finding values: the contract between the detectors and the merge."""

from __future__ import annotations

import pytest

from reprobridge.detect.base import Finding
from reprobridge.detect.findings import (
    CudaValue,
    PythonVersionValue,
    RequirementValue,
    of_type,
)


def test_a_finding_refuses_a_value_of_another_kind() -> None:
    with pytest.raises(ValueError, match="a cuda finding with a python_requirement value"):
        Finding("cuda", "cuda", RequirementValue("torch", True), (), "test")


def test_to_json_is_the_dict_the_value_was_before_it_was_typed() -> None:
    assert RequirementValue("torch==2.1", True).to_json() == {
        "requirement": "torch==2.1",
        "declared": True,
    }
    imported = RequirementValue("einops", False, importers=("a.py",), support_only=True)
    assert imported.to_json() == {
        "requirement": "einops",
        "declared": False,
        "importers": ["a.py"],
        "support_only": True,
    }
    assert PythonVersionValue(exact="3.10").to_json() == {"exact": "3.10"}


def test_of_type_picks_the_findings_of_that_kind() -> None:
    cuda = Finding("cuda", "cuda", CudaValue("12.1"), (), "test")
    by_kind = {"cuda": [cuda], "python_requirement": []}
    assert of_type(by_kind, CudaValue) == [cuda]
    assert of_type(by_kind, RequirementValue) == []
    assert of_type({}, PythonVersionValue) == []


def test_a_finding_refuses_an_untyped_value() -> None:
    with pytest.raises(ValueError, match="a cuda finding with a dict value"):
        Finding("cuda", "cuda", {"version": "12.1"}, (), "test")  # type: ignore[type-var]

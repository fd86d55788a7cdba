"""Two audits of the same inputs within one second get distinct bundles.

The id is the second and a digest of the manifest and commit; once audits got fast, a
benchmark running two back to back failed with "evidence bundle already exists".
"""

from __future__ import annotations

from pathlib import Path

from reprobridge.audit.auditor import _fresh_audit_id, _new_audit_id


def test_an_id_taken_in_this_second_waits_for_the_next(tmp_path: Path) -> None:
    taken = _new_audit_id(b"manifest", "c" * 40)
    (tmp_path / taken).mkdir()
    fresh = _fresh_audit_id(tmp_path, b"manifest", "c" * 40)
    assert fresh != taken
    assert not (tmp_path / fresh).exists()
    assert fresh.rsplit("-", 1)[1] == taken.rsplit("-", 1)[1]  # same inputs, same digest

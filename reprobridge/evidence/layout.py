"""The names inside an evidence bundle (``repro/evidence/<audit-id>/``), in one place: the
writer (:mod:`~reprobridge.evidence.bundle`), the readers (``store``, ``verify``, ``sign``,
``rb report``, ``rb archive``) and the auditor spell each file through these.

Plain strings and one pattern: importing this module loads nothing else.
"""

from __future__ import annotations

import re

#: An audit id: a bundle's directory name (and nothing that could climb out of it).
AUDIT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

PLAN_FILE = "plan.json"
AUDIT_FILE = "audit.json"
ENVIRONMENT_FILE = "environment.json"
JOURNAL_FILE = "journal.jsonl"
SUMS_FILE = "SHA256SUMS"
#: A run's record, written last: its existence makes the run sealed.
STATUS_FILE = "status.json"
RUNS_DIR = "runs"
LOCK_FILE = ".lock"
LOCK_OWNER_FILE = ".lock.owner"
STATEMENT_FILE = "statement.dsse.json"
SIGNER_PUB_FILE = "signer.pub"
#: ``--allow-dirty``: the uncommitted changes no run included, and their diff.
DIRTY_RECORD = "inputs/dirty.json"
DIRTY_DIFF = "inputs/dirty.diff"

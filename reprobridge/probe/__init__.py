"""`rb init`'s probe: the draft is run, its failures classified and repaired.

Static recovery writes a draft; the probe runs the chosen experiments' smoke tier in the
audit's sandbox, classifies what went wrong (:mod:`.observe`), applies the repairs of
one ordered list (:mod:`.repairs`) and runs again (:mod:`.loop`). What it decides is kept in
``repro/probe.toml`` (:mod:`.record`) and applied to every later draft (:mod:`.apply`).
"""

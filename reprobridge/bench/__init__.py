"""`rb bench`: run `rb init` then a smoke audit on every repository of a suite, and tabulate.

:mod:`.suite` reads the suite file (pydantic, one-line errors), :mod:`.runner` works on each
repository in a copy (parallel, time-limited, resumable), :mod:`.table` turns the records
into totals with Wilson 95% intervals and renders them as Markdown, JSON and HTML.
"""

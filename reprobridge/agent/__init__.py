"""The recovery agent of ``rb init --agent``: a model that reads and runs the repository in a
sandbox and proposes manifest values and patches for a person to review.

``loop`` (the pure tool-use loop, its config and result), ``tools`` (what each tool does),
``schemas`` (the tools as the Messages API sees them), ``workspace`` (the repository copy and
its path rules), ``draft`` (the manifest proposals), ``backends`` (the Messages API),
``ledger`` (tokens and cost), ``transcript`` (the redacted conversation) and ``session``
(the I/O around one run: the copy, the key, the patches, ledger and transcript files).

Nothing is imported here, so ``rb init`` without ``--agent`` loads none of it.
"""

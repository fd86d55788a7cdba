"""Deterministic, verifiable archives of a reproduction package (`rb archive`, `rb unpack`,
`rb check-links`).

Modules: :mod:`~reprobridge.archive.pack` (the byte-deterministic tar writer),
:mod:`~reprobridge.archive.members` (what goes in), :mod:`~reprobridge.archive.rocrate`
(RO-Crate 1.1 metadata), :mod:`~reprobridge.archive.build` (orchestration and signing),
:mod:`~reprobridge.archive.verify` (verification and safe unpacking),
:mod:`~reprobridge.archive.closure` (the Nix closure as a file binary cache),
:mod:`~reprobridge.archive.links` (which links still resolve). Import them directly; this
package imports nothing so ``rb --help`` stays fast.
"""

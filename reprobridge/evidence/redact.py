"""Secrets never reach a log, a record or an archive (reliability.md B4).

Three layers, all here:

1. **Values**: every known secret (``name -> value``, e.g. from :func:`secrets_from_env`)
   is replaced by ``[REDACTED:<NAME>]`` as raw bytes, as URL-encoded text, and as base64
   (standard and URL-safe) at each of the 3 byte alignments it can have inside a longer
   base64 blob, the way CI systems mask secrets. Values shorter than 8 characters are not
   value-redacted (they would blank out ordinary words); their *names* go to ``notes``.
2. **Rules** (gitleaks-derived, each with TP/FP tests): Anthropic, OpenAI, Hugging Face,
   AWS, GitHub tokens, PEM private keys, JWTs and the password of ``scheme://user:pass@``.
   A rule match becomes ``[REDACTED:<rule-id>]``.
3. :func:`scan_for_secrets`: the seal-time backstop, rules only, reporting ``file:line: rule``.

Streaming (:meth:`Redactor.stream`) gives byte-for-byte the same output as redacting the
whole buffer at once, for any chunking: it holds back a window as long as the longest
possible match, so a secret split across two ``read()`` calls is still caught, and its work
is linear in the input (a 100 MB line without a newline costs what 100 MB of lines cost).

Environment: :func:`scrub_env` keeps values only for allowlisted, non-secret-looking names
and stores ``"<redacted>"`` otherwise. It never stores a hash of a secret: low-entropy
secrets are brute-forced from their hashes.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

#: Values shorter than this are not value-redacted (see module doc).
MIN_SECRET_LENGTH = 8

REDACTED_VALUE = "<redacted>"

#: Names whose values are secrets, whatever the allowlist says.
SECRET_NAME = re.compile(r"(?i)(token|secret|key|pass|cred|auth|cookie|session|api)")

#: Provider variables that are secrets even though their names may not look it.
KNOWN_SECRET_VARS = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HUGGINGFACE_TOKEN",
        "WANDB_API_KEY",
        "COMET_API_KEY",
        "NEPTUNE_API_TOKEN",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITLAB_TOKEN",
        "KAGGLE_KEY",
        "AZURE_CLIENT_SECRET",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "DATABASE_URL",
        # Nix: `access-tokens = github.com=...` lives in NIX_CONFIG.
        "NIX_CONFIG",
        "NETRC",
    }
)

#: Names (fnmatch patterns) whose values an env snapshot keeps. Secret-looking names are
#: redacted even when they match. NIX_CONFIG is deliberately absent (it can hold tokens),
#: and so are HOME/USER/PWD (they name a person, and bundles get published).
DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "PYTHONHASHSEED",
    "PYTHONPATH",
    "PYTHONNOUSERSITE",
    "PYTHONDONTWRITEBYTECODE",
    "CUBLAS_WORKSPACE_CONFIG",
    # Thread counts (OMP_NUM_THREADS, VECLIB_MAXIMUM_THREADS, TF_NUM_INTRAOP_THREADS, ...:
    # reprobridge.audit.threads.THREAD_VARS and the like).
    "*_NUM_THREADS",
    "*_MAXIMUM_THREADS",
    "TF_NUM_*_THREADS",
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "XLA_FLAGS",
    "SOURCE_DATE_EPOCH",
    "IN_NIX_SHELL",
    "NIX_BUILD_CORES",
    "NIX_STORE",
    "NIX_PATH",
    "NIX_SSL_CERT_FILE",
    "NIX_ENFORCE_PURITY",
    "NIX_CC",
    "NIX_BINTOOLS",
    "NIX_HARDENING_ENABLE",
    "NIX_CFLAGS_COMPILE",
    "NIX_LDFLAGS",
    "RB_*",
)


@dataclass(frozen=True)
class Rule:
    """One regex rule: ``pattern`` (bytes regex source) matches at most ``max_len`` bytes.

    ``secret_group`` names the sub-group that is the secret when only part of the match
    must go (the password of a URL); otherwise the whole match is replaced. Patterns use
    bounded repeats only and no ``^``/``$``/``\\Z`` anchors, which is what lets a stream be
    redacted exactly like a whole buffer.
    """

    id: str
    pattern: str
    max_len: int
    #: Literals one of which every match starts with (after zero-width lookbehinds): the
    #: scanner tries the full regex only where one occurs, found with bytes.find.
    prefixes: tuple[str, ...]
    secret_group: str | None = None


_TOK = r"A-Za-z0-9_\-"
_NB = rf"(?<![{_TOK}])"  # not preceded by a token character
_NA = rf"(?![{_TOK}])"  # not followed by one

RULES: tuple[Rule, ...] = (
    Rule(
        "anthropic-api-key", rf"{_NB}sk-ant-(?:api03|admin01)-[{_TOK}]{{93}}AA", 112, ("sk-ant-",)
    ),
    Rule(
        "anthropic-oauth-token",
        rf"{_NB}sk-ant-(?:oat01|ort01)-[{_TOK}]{{40,256}}",
        269,
        ("sk-ant-",),
    ),
    Rule(
        "openai-project-key", rf"{_NB}sk-(?:proj|svcacct|admin)-[{_TOK}]{{40,256}}", 267, ("sk-",)
    ),
    Rule("openai-api-key", rf"{_NB}sk-[A-Za-z0-9]{{48}}{_NA}", 51, ("sk-",)),
    Rule("huggingface-token", rf"{_NB}hf_[A-Za-z]{{34}}{_NA}", 37, ("hf_",)),
    Rule(
        "aws-access-key-id",
        r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])",
        20,
        ("AKIA", "ASIA"),
    ),
    Rule(
        "github-token",
        rf"{_NB}gh[pousr]_[A-Za-z0-9]{{36}}{_NA}",
        40,
        tuple(f"gh{c}_" for c in "pousr"),
    ),
    Rule(
        "github-fine-grained-pat", rf"{_NB}github_pat_[A-Za-z0-9_]{{82}}{_NA}", 93, ("github_pat_",)
    ),
    Rule(
        "private-key",
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"[A-Za-z0-9+/=\r\n]{0,16384}"
        r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
        16384 + 2 * (40 + 32),
        ("-----BEGIN",),
    ),
    Rule(
        "jwt",
        rf"{_NB}eyJ[{_TOK}]{{5,4096}}\.eyJ[{_TOK}]{{5,8192}}\.[{_TOK}]{{10,2048}}",
        3 + 4096 + 1 + 3 + 8192 + 1 + 2048,
        ("eyJ",),
    ),
    # scheme://user:password@ -> only the password goes. Anchored on "://" (not on the
    # scheme) so a long run of letters costs one failed attempt per position, not 20.
    Rule(
        "url-password",
        r"://[^\s:/@\[\]]{0,256}:(?P<urlpw>(?!\[REDACTED)[^\s/@]{1,256})@",
        3 + 256 + 1 + 256 + 1,
        ("://",),
        secret_group="urlpw",
    ),
)

# Lookbehinds above look back one byte; the stream keeps a little more as context.
_CONTEXT = 16
# Lookaheads look one byte past a match.
_LOOKAHEAD = 1
_SEGMENT = 1 << 20


def _name_label(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "SECRET"


def _b64_cores(value: bytes) -> list[bytes]:
    """The base64 text a value contributes at each of the 3 alignments, minus the edge
    characters that also depend on the neighbouring bytes (GitHub Actions' masking)."""
    out: list[bytes] = []
    n = len(value)
    for i in range(3):
        enc = base64.b64encode(b"\0" * i + value).rstrip(b"=")
        start = -(-8 * i // 6)  # ceil(8i/6): first char made only of value bits
        end = (8 * (i + n)) // 6  # chars before this are complete within the value
        core = enc[start:end]
        if len(core) >= MIN_SECRET_LENGTH:
            out.append(core)
    return out


def secret_forms(value: str) -> list[bytes]:
    """Every byte form of ``value`` that is redacted: raw, URL-encoded, base64 (both
    alphabets, 3 alignments). Longest first, duplicates removed."""
    raw = value.encode("utf-8")
    forms = {raw}
    for q in (urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)):
        forms.add(q.encode("ascii"))
        # Some clients write lowercase percent escapes.
        forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), q).encode("ascii"))
    for core in _b64_cores(raw):
        forms.add(core)
        forms.add(core.translate(bytes.maketrans(b"+/", b"-_")))
    return sorted((f for f in forms if len(f) >= MIN_SECRET_LENGTH), key=lambda f: (-len(f), f))


class Redactor:
    """Replace known secret values and rule matches (see the module doc).

    ``known_secrets`` maps a name (used in the placeholder, never the value) to a value.
    ``rules`` defaults to :data:`RULES`; pass ``()`` for value redaction only.
    """

    def __init__(
        self, known_secrets: Mapping[str, str] | None = None, *, rules: Iterable[Rule] = RULES
    ) -> None:
        self.notes: list[str] = []
        self._rules = tuple(rules)
        alternatives: list[str] = []
        self._labels: dict[str, tuple[bytes, str | None]] = {}
        max_len = 0
        # Longest value first, so a secret that contains another is replaced whole.
        pairs: list[tuple[bytes, str]] = []
        for name, value in sorted((known_secrets or {}).items()):
            if not value:
                continue
            if len(value) < MIN_SECRET_LENGTH:
                self.notes.append(
                    f"{name}: value shorter than {MIN_SECRET_LENGTH} characters is not value-redacted"
                )
                continue
            pairs.extend((form, name) for form in secret_forms(value))
        seen: set[bytes] = set()
        for i, (form, name) in enumerate(sorted(pairs, key=lambda p: (-len(p[0]), p[0]))):
            if form in seen:
                continue
            seen.add(form)
            group = f"k{i}"
            alternatives.append(f"(?P<{group}>{re.escape(form.decode('latin-1'))})")
            self._labels[group] = (f"[REDACTED:{_name_label(name)}]".encode(), None)
            max_len = max(max_len, len(form))
        for i, rule in enumerate(self._rules):
            group = f"r{i}"
            alternatives.append(f"(?P<{group}>{rule.pattern})")
            self._labels[group] = (f"[REDACTED:{rule.id}]".encode(), rule.secret_group)
            max_len = max(max_len, rule.max_len)
        self._prefixes: tuple[bytes, ...] = tuple(
            sorted({p.encode() for rule in self._rules for p in rule.prefixes} | seen)
        )
        # latin-1 maps bytes 1:1 to code points, so str patterns become exact bytes patterns.
        self._regex: re.Pattern[bytes] | None = (
            re.compile("|".join(alternatives).encode("latin-1")) if alternatives else None
        )
        #: Bytes held back while streaming: longest match plus the lookahead byte.
        self.window = max_len + _LOOKAHEAD

    def _replace(self, m: re.Match[bytes]) -> bytes:
        group = m.lastgroup
        assert group is not None
        label, sub = self._labels[group]
        if sub is None:
            return label
        s, e = m.span(sub)
        base = m.start()
        whole = m.group(0)
        return whole[: s - base] + label + whole[e - base :]

    def matches(
        self, data: bytes, pos: int = 0, stop: int | None = None
    ) -> Iterator[re.Match[bytes]]:
        """Leftmost-first, non-overlapping matches starting in ``[pos, stop)``.

        Exactly what ``regex.finditer(data, pos)`` yields (bytes before ``pos`` serve as
        lookbehind context), but the regex is tried only where a prefix literal occurs:
        the alternation of ~40 branches costs ~0.5 µs per byte when tried everywhere,
        while ``bytes.find`` for each literal runs at memory speed.
        """
        if self._regex is None:
            return
        end = len(data) if stop is None else stop
        # Candidates are gathered per 1 MiB segment, so memory stays bounded even when a
        # prefix occurs at every other byte.
        for seg in range(pos, end, _SEGMENT):
            seg_end = min(seg + _SEGMENT, end)
            candidates: set[int] = set()
            for lit in self._prefixes:
                i = data.find(lit, max(seg, pos), seg_end + len(lit) - 1)
                while i != -1:
                    candidates.add(i)
                    i = data.find(lit, i + 1, seg_end + len(lit) - 1)
            for p in sorted(candidates):
                if p < pos:
                    continue  # inside the previous match
                m = self._regex.match(data, p)
                if m is not None:
                    yield m
                    pos = m.end()

    def label(self, m: re.Match[bytes]) -> str:
        """The rule id or secret name a match is for (``[REDACTED:<this>]``)."""
        assert m.lastgroup is not None
        return self._labels[m.lastgroup][0].decode()[10:-1]

    def redact_bytes(self, data: bytes) -> bytes:
        """``data`` with every secret replaced."""
        if self._regex is None:
            return bytes(data)
        out: list[bytes] = []
        emitted = 0
        for m in self.matches(data):
            out.append(data[emitted : m.start()])
            out.append(self._replace(m))
            emitted = m.end()
        out.append(data[emitted:])
        return b"".join(out)

    def redact_text(self, s: str) -> str:
        """``s`` with every secret replaced (UTF-8 round trip; lone surrogates kept)."""
        return self.redact_bytes(s.encode("utf-8", "surrogatepass")).decode(
            "utf-8", "surrogatepass"
        )

    def stream(self) -> StreamRedactor:
        """A fresh incremental redactor over this one's secrets and rules."""
        return StreamRedactor(self)


class StreamRedactor:
    """Incremental redaction: ``feed(chunk)`` returns what is final so far, ``flush()`` the rest.

    The concatenated output equals ``Redactor.redact_bytes`` of the concatenated input for
    every chunking. It holds back at most ``2 * window + chunk`` bytes, and processes input
    only once at least ``max(2 * window, 64 KiB)`` are pending, so tiny feeds stay linear.
    """

    def __init__(
        self, redactor: Redactor, *, on_match: Callable[[int, str], None] | None = None
    ) -> None:
        self._r = redactor
        self._pending = bytearray()
        self._ctx = b""  # original bytes just before _pending, for lookbehind
        self._offset = 0  # absolute offset of _pending[0] in the input stream
        self._threshold = max(2 * redactor.window, 1 << 16)
        self._on_match = on_match

    def feed(self, chunk: bytes) -> bytes:
        """Take more input; return the redacted output that can no longer change."""
        self._pending += chunk
        if len(self._pending) < self._threshold:
            return b""
        return self._process(final=False)

    def flush(self) -> bytes:
        """End of input: return everything still held back, redacted."""
        return self._process(final=True)

    def _process(self, *, final: bool) -> bytes:
        base = len(self._ctx)
        data = self._ctx + bytes(self._pending)
        # A match starting before `limit` has all the bytes it could ever span in `data`
        # (window = longest match + lookahead), so it is the match the whole buffer gets.
        limit = len(data) if final else len(data) - self._r.window
        out: list[bytes] = []
        emitted = base
        for m in self._r.matches(data, base, limit):
            s, e = m.span()
            out.append(data[emitted:s])
            out.append(self._r._replace(m))
            if self._on_match is not None:
                self._on_match(self._offset + s - base, self._r.label(m))
            emitted = e
        cut = max(limit, emitted)
        out.append(data[emitted:cut])
        # `data` starts with the old context, so this is right even when little was cut.
        self._ctx = data[max(0, cut - _CONTEXT) : cut]
        self._offset += cut - base
        self._pending = bytearray(data[cut:])
        return b"".join(out)


def secrets_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """``{name: value}`` of variables that hold secrets: secret-looking names
    (:data:`SECRET_NAME`) and :data:`KNOWN_SECRET_VARS`; empty values skipped."""
    return {
        name: value
        for name, value in env.items()
        if value and (name in KNOWN_SECRET_VARS or SECRET_NAME.search(name))
    }


_RULES_ONLY: Redactor | None = None


def _rules_only() -> Redactor:
    global _RULES_ONLY
    if _RULES_ONLY is None:
        _RULES_ONLY = Redactor({})
    return _RULES_ONLY


def scrub_env(
    env: Mapping[str, str], allowlist: Iterable[str] = DEFAULT_ENV_ALLOWLIST
) -> dict[str, str]:
    """An environment snapshot safe to store: every name, values only where safe.

    A value is kept when its name matches an ``allowlist`` pattern (fnmatch, e.g.
    ``LC_*``) and is neither secret-looking nor a known secret variable; even then the
    regex rules run over it (a token pasted into ``PYTHONPATH`` still goes). Every other
    value becomes ``"<redacted>"``: no hash, no length, no prefix.
    """
    patterns = tuple(allowlist)
    rules = _rules_only()
    out: dict[str, str] = {}
    for name in sorted(env):
        secret = name in KNOWN_SECRET_VARS or SECRET_NAME.search(name) is not None
        if not secret and any(fnmatchcase(name, p) for p in patterns):
            out[name] = rules.redact_text(env[name])
        else:
            out[name] = REDACTED_VALUE
    return out


def scan_for_secrets(path: Path, *, display: str | None = None) -> list[str]:
    """Seal-time backstop: ``["<file>:<line>: <rule-id>", ...]`` for rule matches in ``path``.

    Regex rules only (known values were the streaming layer's job); already-redacted
    placeholders do not match. The file is read in 1 MiB chunks, so any size and any
    line length is fine. ``display`` replaces the path in findings.
    """
    hits: list[tuple[int, str]] = []
    stream = StreamRedactor(_rules_only(), on_match=lambda off, label: hits.append((off, label)))
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            stream.feed(chunk)
    stream.flush()
    if not hits:
        return []
    # Second pass: map offsets to line numbers without keeping the file in memory.
    name = display if display is not None else str(path)
    findings: list[str] = []
    line, pos, idx = 1, 0, 0
    with open(path, "rb") as fh:
        while idx < len(hits) and (chunk := fh.read(1 << 20)):
            while idx < len(hits) and hits[idx][0] < pos + len(chunk):
                off, label = hits[idx]
                at = line + chunk.count(b"\n", 0, off - pos)
                findings.append(f"{name}:{at}: {label}")
                idx += 1
            line += chunk.count(b"\n")
            pos += len(chunk)
    return findings

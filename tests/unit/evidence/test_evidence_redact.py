"""Redaction: every rule with true and false positives, known values in all their forms,
secrets split across chunks, stream == whole buffer, bounded time on a huge line, env
scrubbing and the seal-time scanner (reliability.md cases 8, 17, 28-30)."""

from __future__ import annotations

import base64
import random
import re
import time
import urllib.parse
from pathlib import Path

import pytest
from evidence_helpers import AUDIT_ID, fake, rand
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobridge.evidence import (
    Bundle,
    Redactor,
    SecretFoundError,
    scan_for_secrets,
    scrub_env,
    secrets_from_env,
)
from reprobridge.evidence.redact import RULES, secret_forms

# kind of fake secret -> the rule id that must catch it
TRUE_POSITIVES = {
    "anthropic-api03": "anthropic-api-key",
    "anthropic-admin01": "anthropic-api-key",
    "anthropic-oat01": "anthropic-oauth-token",
    "openai-legacy": "openai-api-key",
    "openai-proj": "openai-project-key",
    "huggingface": "huggingface-token",
    "aws": "aws-access-key-id",
    "github": "github-token",
    "github-pat": "github-fine-grained-pat",
    "jwt": "jwt",
    "pem": "private-key",
}


def _false_positives() -> list[str]:
    rnd = random.Random(7)
    hexd = "0123456789abcdef"
    sk = "s" + "k-"
    return [
        "epoch 3 step 1200 loss=0.1234 acc=0.9876 lr=3e-4",
        "sha256=" + rand(hexd, 64, rnd),
        "commit " + rand(hexd, 40, rnd) + " (HEAD -> main)",
        "run id 123e4567-e89b-12d3-a456-426614174000",
        "from sklearn.model_selection import train_test_split",
        "task-" + rand("abcdefghijklmnopqrstuvwxyz0123456789", 48, rnd),
        sk + rand("abcdefghijklmnop0123456789", 47, rnd),  # one short of an OpenAI key
        sk + rand("abcdefghijklmnop0123456789", 49, rnd),  # one too long
        sk + "ant-" + "api" + "03-" + rand("abcdefgh", 92, rnd) + "AA",  # one short
        "hf_hub_download(repo_id='bert-base-uncased')",
        "h" + "f_" + rand("abcdefgh", 33, rnd),
        "h" + "f_" + rand("abcdefgh", 35, rnd),
        "XAK" + "IA" + rand("ABCDEFGH0123", 16, rnd),  # inside a longer word
        "AK" + "IA" + rand("ABCDEFGH0123", 15, rnd),
        "sig" + "hp_" + rand("abcdef0123", 36, rnd),
        "https://user@example.com/path",
        "http://localhost:8080/metrics",
        "ssh://git@github.com/org/repo.git",
        "postgres://db.example.com:5432/app",
        "-----BEGIN "
        + "PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "eyJ" + "hbGciOiJIUzI1NiJ9 (only a header)",
        "base64 data: " + base64.b64encode(rnd.randbytes(60)).decode(),
        "[REDACTED:anthropic-api-key] and https://u:[REDACTED:url-password]@h",
    ]


@pytest.mark.parametrize("kind", sorted(TRUE_POSITIVES))
def test_rule_true_positive(kind: str) -> None:
    secret = fake(kind)
    rule = TRUE_POSITIVES[kind]
    r = Redactor({})
    for ctx in ("{}", "token={}\n", "export X='{}';", 'json {{"k": "{}"}}', "{} trailing"):
        text = ctx.format(secret)
        out = r.redact_text(text)
        assert secret not in out
        assert f"[REDACTED:{rule}]" in out
        assert out == ctx.format(f"[REDACTED:{rule}]")


@pytest.mark.parametrize("text", _false_positives())
def test_rule_false_positive_untouched(text: str) -> None:
    assert Redactor({}).redact_text(text) == text
    assert Redactor({}).redact_text(text + "\n" + text) == text + "\n" + text


def test_url_password_only_the_password_goes() -> None:
    pw = "hunt" + "er2" + "XyZ"
    out = Redactor({}).redact_text(f"pip install git+https://alice:{pw}@git.example.com/r.git")
    assert out == "pip install git+https://alice:[REDACTED:url-password]@git.example.com/r.git"
    assert (
        Redactor({}).redact_text("redis://:" + pw + "@cache:6379")
        == "redis://:[REDACTED:url-password]@cache:6379"
    )


def test_every_rule_has_fixtures_and_bounded_width() -> None:
    import re._parser as sre_parse  # the one way to read a pattern's max width

    assert {r.id for r in RULES} == set(TRUE_POSITIVES.values()) | {"url-password"}
    for rule in RULES:
        parsed = sre_parse.parse(rule.pattern)
        _lo, hi = parsed.getwidth()
        assert hi <= rule.max_len, (rule.id, hi, rule.max_len)
        # No ^/$/\\A/\\Z: a stream's chunk edges must not look like the string's edges.
        assert "(AT, " not in str(parsed), rule.id


@pytest.mark.parametrize("kind", sorted(TRUE_POSITIVES))
def test_matches_start_with_a_declared_prefix(kind: str) -> None:
    secret = fake(kind)
    rule = next(r for r in RULES if r.id == TRUE_POSITIVES[kind])
    m = re.search(rule.pattern.encode(), b"x " + secret.encode())
    assert m is not None and any(m.group(0).startswith(p.encode()) for p in rule.prefixes)


# ---------------------------------------------------------------- known values


SECRET_VALUE = "Tr0ub4dor&3-" + "horse/battery+staple=é"


def test_known_value_and_its_forms() -> None:
    r = Redactor({"MY_TOKEN": SECRET_VALUE})
    raw = SECRET_VALUE.encode()
    samples = [
        SECRET_VALUE,
        urllib.parse.quote(SECRET_VALUE, safe=""),
        urllib.parse.quote_plus(SECRET_VALUE),
        # Lowercase percent escapes (some clients write them).
        re.sub(
            r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(SECRET_VALUE, safe="")
        ),
    ]
    for prefix in (b"", b"x", b"xy"):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            samples.append(enc(prefix + raw + b"tail").decode())
    for s in samples:
        out = r.redact_text(f"before {s} after")
        assert "[REDACTED:MY_TOKEN]" in out, s
        assert s not in out
    # Standalone base64 of the value (as in an Authorization header).
    out = r.redact_text("Basic " + base64.b64encode(raw).decode())
    assert "[REDACTED:MY_TOKEN]" in out


def test_base64_cores_cover_all_alignments() -> None:
    raw = SECRET_VALUE.encode()
    forms = secret_forms(SECRET_VALUE)
    for prefix in (b"", b"a", b"ab"):
        for suffix in (b"", b"c", b"cd"):
            for enc in (base64.b64encode, base64.urlsafe_b64encode):
                blob = enc(prefix + raw + suffix)
                assert any(f in blob for f in forms), (prefix, suffix, enc)


def test_short_values_are_noted_not_redacted() -> None:
    r = Redactor({"PIN": "1234", "EMPTY": ""})
    assert r.redact_text("pin 1234") == "pin 1234"
    assert r.notes == ["PIN: value shorter than 8 characters is not value-redacted"]
    assert "1234" not in " ".join(r.notes)


def test_longer_secret_containing_a_shorter_one_goes_whole() -> None:
    r = Redactor({"A": "abcdefgh12", "B": "xxabcdefgh12yy"})
    assert r.redact_text("v=xxabcdefgh12yy") == "v=[REDACTED:B]"


def test_invalid_utf8_and_binary_pass_through() -> None:
    r = Redactor({"K": "secretvalue123"})
    data = b"\xff\xfe\x00bin secretvalue123 \x80\n"
    assert r.redact_bytes(data) == b"\xff\xfe\x00bin [REDACTED:K] \x80\n"


# ---------------------------------------------------------------- streaming


def _stream(r: Redactor, data: bytes, cuts: list[int]) -> bytes:
    s = r.stream()
    out = []
    prev = 0
    for c in [*sorted(cuts), len(data)]:
        out.append(s.feed(data[prev:c]))
        prev = c
    out.append(s.flush())
    return b"".join(out)


def test_secret_split_across_two_chunks_at_every_position() -> None:
    token = fake("github")
    r = Redactor({"MY_TOKEN": SECRET_VALUE})
    for secret, label in ((SECRET_VALUE.encode(), b"MY_TOKEN"), (token.encode(), b"github-token")):
        data = b"x" * 70_000 + b" " + secret + b" " + b"y" * 10
        start = 70_001
        for cut in range(start - 1, start + len(secret) + 2):
            out = _stream(r, data, [cut])
            assert secret not in out and b"[REDACTED:" + label + b"]" in out, cut
            assert out == r.redact_bytes(data)


def test_one_byte_feeds_are_linear_and_exact() -> None:
    r = Redactor({"K": "secretvalue123"})
    data = (b"log line secretvalue123 ok " + fake("aws").encode() + b"\n") * 3000
    s = r.stream()
    started = time.perf_counter()
    out = b"".join(s.feed(data[i : i + 1]) for i in range(len(data))) + s.flush()
    assert time.perf_counter() - started < 20
    assert out == r.redact_bytes(data)


_PIECES = st.sampled_from(
    [fake(k, random.Random(i)).encode() for i, k in enumerate(sorted(TRUE_POSITIVES))]
    + [
        SECRET_VALUE.encode(),
        base64.b64encode(b"ab" + SECRET_VALUE.encode()),
        urllib.parse.quote(SECRET_VALUE, safe="").encode(),
        b"https://u:pw12345@h/x",
        b"\n",
        b" ",
        b"loss=0.1234",
        b"sk-",
        b"://",
        b"eyJ",
        b"-----BEGIN ",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.one_of(_PIECES, st.binary(max_size=300)), max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=8),
    pad=st.integers(min_value=0, max_value=140_000),
)
def test_stream_equals_whole_buffer(parts: list[bytes], cuts: list[int], pad: int) -> None:
    r = Redactor({"MY_TOKEN": SECRET_VALUE})
    # Padding pushes secrets past the stream's processing threshold, so the window logic
    # (not only flush) is exercised.
    data = b"".join(parts[: len(parts) // 2]) + b"." * pad + b"".join(parts[len(parts) // 2 :])
    cuts = [min(c * 7, len(data)) for c in cuts]
    whole = r.redact_bytes(data)
    assert _stream(r, data, cuts) == whole
    assert SECRET_VALUE.encode() not in whole


def test_huge_line_without_newline_is_bounded() -> None:
    rnd = random.Random(3)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 =.,:/_-"
    block = bytes(rnd.choice(alphabet) for _ in range(1 << 16))
    token = fake("anthropic-api03").encode()
    data = block * 160 + b" " + token + b" " + block * 160  # ~21 MB, one line
    r = Redactor({"MY_TOKEN": SECRET_VALUE})
    s = r.stream()
    started = time.perf_counter()
    out = bytearray()
    for i in range(0, len(data), 1 << 16):
        out += s.feed(data[i : i + (1 << 16)])
    out += s.flush()
    elapsed = time.perf_counter() - started
    assert token not in out and b"[REDACTED:anthropic-api-key]" in out
    assert len(out) == len(data) - len(token) + len(b"[REDACTED:anthropic-api-key]")
    assert elapsed < 15, elapsed


def test_prefix_flood_is_linear() -> None:
    r = Redactor({})

    def cost(n: int) -> float:
        # Best of three: a loaded machine preempts one pass; the algorithm's cost is the
        # fastest (a quadratic scan is slow every time).
        data = b"sk-://" * n
        times = []
        for _ in range(3):
            t = time.perf_counter()
            assert r.redact_bytes(data) == data
            times.append(time.perf_counter() - t)
        return min(times)

    small, big = cost(50_000), cost(400_000)
    assert big < max(small, 0.01) * 8 * 3  # linear: 8x the input, within noise


# ---------------------------------------------------------------- environment


def test_secrets_from_env() -> None:
    env = {
        "PATH": "/usr/bin",
        "HF_TOKEN": "hf-value-123456",
        "MY_API_BASE": "https://api.example.com",
        "DB_PASSWORD": "pw-value-123",
        "AWS_ACCESS_KEY_ID": "id-value-1234",
        "NIX_CONFIG": "access-tokens = github.com=abcdefgh",
        "EMPTY_TOKEN": "",
        "LANG": "C.UTF-8",
    }
    assert secrets_from_env(env) == {
        "HF_TOKEN": "hf-value-123456",
        "MY_API_BASE": "https://api.example.com",
        "DB_PASSWORD": "pw-value-123",
        "AWS_ACCESS_KEY_ID": "id-value-1234",
        "NIX_CONFIG": "access-tokens = github.com=abcdefgh",
    }


def test_scrub_env() -> None:
    secret = fake("github")
    env = {
        "PATH": "/nix/store/x/bin:/usr/bin",
        "LC_ALL": "C",
        "CUDA_VISIBLE_DEVICES": "0",
        "PYTHONHASHSEED": "0",
        "NIX_BUILD_CORES": "4",
        "RB_AUDIT_ID": "a1",
        "RB_SIGNING_KEY": "/secret/path",  # allowlisted prefix, secret-looking name
        "GITHUB_TOKEN": secret,
        "FAKE_TOKEN": "x" * 20,
        "NIX_CONFIG": "access-tokens = github.com=" + secret,
        "HOSTNAME": "box",
        "PYTHONPATH": "/src:" + secret,  # allowlisted, but a token inside is still redacted
    }
    out = scrub_env(env)
    assert (
        out["PATH"] == env["PATH"] and out["LC_ALL"] == "C" and out["CUDA_VISIBLE_DEVICES"] == "0"
    )
    assert out["RB_AUDIT_ID"] == "a1" and out["NIX_BUILD_CORES"] == "4"
    for name in ("RB_SIGNING_KEY", "GITHUB_TOKEN", "FAKE_TOKEN", "NIX_CONFIG", "HOSTNAME"):
        assert out[name] == "<redacted>", name
    assert out["PYTHONPATH"] == "/src:[REDACTED:github-token]"
    assert set(out) == set(env)
    blob = repr(out)
    assert secret not in blob and "x" * 20 not in blob
    # No hash of any secret either (reliability.md B4).
    import hashlib

    for value in (secret, "x" * 20):
        assert hashlib.sha256(value.encode()).hexdigest()[:16] not in blob
    assert scrub_env(env, allowlist=["PATH"])["LC_ALL"] == "<redacted>"


def test_env_leak_end_to_end(tmp_path: Path) -> None:
    """Case 8: a FAKE_TOKEN printed by the experiment never reaches the stored evidence."""
    value = rand("abcdefghijklmnopqrstuvwxyz0123456789", 32)
    env = {"FAKE_TOKEN": value, "PATH": "/usr/bin"}
    r = Redactor(secrets_from_env(env))
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock():
        run = bundle.run_dir("e", 1)
        s = r.stream()
        printed = f"FAKE_TOKEN={value}\nPATH=/usr/bin\n".encode() * 3
        (run / "stdout.log").write_bytes(s.feed(printed[:20]) + s.feed(printed[20:]) + s.flush())
        bundle.write_json("runs/e/1/env.json", scrub_env(env))
        bundle.seal_run("e", 1, {"exit": 0})
        bundle.write_sha256sums()
    for p in bundle.path.rglob("*"):
        if p.is_file():
            assert value.encode() not in p.read_bytes(), p


# ---------------------------------------------------------------- seal-time backstop


def test_scan_for_secrets_reports_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "stdout.log"
    f.write_bytes(
        b"line one\nloss=0.1234\n"
        + b"token "
        + fake("huggingface").encode()
        + b"\n"
        + b"a" * 3_000_000
        + b" "
        + fake("aws").encode()
        + b"\n"
        + fake("pem").encode()
        + b"\n"
    )
    assert scan_for_secrets(f) == [
        f"{f}:3: huggingface-token",
        f"{f}:4: aws-access-key-id",
        f"{f}:5: private-key",
    ]
    assert scan_for_secrets(f, display="x.log")[0] == "x.log:3: huggingface-token"
    clean = tmp_path / "clean.log"
    clean.write_bytes(Redactor({}).redact_bytes(f.read_bytes()))
    assert scan_for_secrets(clean) == []


def test_seal_refuses_a_run_holding_a_secret(tmp_path: Path) -> None:
    """Case 30: the streaming layer missed one; sealing is refused with file:line."""
    bundle = Bundle.create(tmp_path, AUDIT_ID)
    with bundle.lock():
        run = bundle.run_dir("e", 1)
        (run / "stdout.log").write_bytes(b"ok\nkey " + fake("anthropic-api03").encode() + b"\n")
        with pytest.raises(SecretFoundError) as info:
            bundle.seal_run("e", 1, {"exit": 0})
        assert info.value.findings == ["runs/e/1/stdout.log:2: anthropic-api-key"]
        assert not (run / "status.json").exists()
        assert bundle.run_state("e", 1) == "partial"


def test_credential_and_auth_variables_are_secrets_in_logs_and_env() -> None:
    """``cred`` and ``auth`` in a variable's name make it a secret: without them in the
    name pattern, DB_CREDENTIALS's and PROXY_AUTH's values reached the logs."""
    env = {
        "DB_CREDENTIALS": "dbuser:s3cr3t-db-passphrase",
        "PROXY_AUTH": "Basic cHJveHk6aHVudGVyMg-proxy",
        "LANG": "C.UTF-8",
    }
    secrets = secrets_from_env(env)
    assert sorted(secrets) == ["DB_CREDENTIALS", "PROXY_AUTH"]
    log = Redactor(secrets).redact_text(
        f"connecting with {env['DB_CREDENTIALS']} via {env['PROXY_AUTH']}\n"
    )
    assert "s3cr3t-db-passphrase" not in log and "cHJveHk6aHVudGVyMg-proxy" not in log
    scrubbed = scrub_env(env, allowlist=("*",))
    assert scrubbed["DB_CREDENTIALS"] == scrubbed["PROXY_AUTH"] == "<redacted>"
    assert scrubbed["LANG"] == "C.UTF-8"

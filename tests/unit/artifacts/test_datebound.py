"""The date bound moves only for the packages it leaves without a usable release (issue 9:
get-started-with-JAX had no jaxlib on PyPI before its 2022-01 bound; augmented-neural-odes
no torchdiffeq before 2019-07), and packages released in lock-step move together."""

from __future__ import annotations

from collections.abc import Sequence

from reprobridge import _proc
from reprobridge.artifacts import datebound
from reprobridge.artifacts.datebound import Relaxation, release_family, resolve_within_bound
from reprobridge.data import load_packages

BOUND = "2022-01-23T00:00:00Z"
#: A tiny "index": package -> the upload day of its oldest release usable here.
FIRST_USABLE = {"jaxlib": "2023-06-22", "ml-dtypes": "2023-01-10", "jax": "2018-12-01"}
#: What needs what, once relaxed (a newer jaxlib needs a newer ml-dtypes).
NEEDS = {"jaxlib": ["ml-dtypes"]}


def _hint(name: str, how: str = "exclude-newer") -> str:
    return (
        f"hint: `{name}` was filtered by `{how}` to only include packages uploaded before "
        f"{BOUND}. Consider using `exclude-newer-package` to override the cutoff.\n"
    )


class FakeUv:
    """A resolution over :data:`FIRST_USABLE`: fails naming the first package whose bound
    (global or moved) leaves it nothing, as uv's hint does."""

    def __init__(self, wanted: Sequence[str], first: dict[str, str] | None = None) -> None:
        self.wanted = list(wanted)
        self.first = FIRST_USABLE if first is None else first
        self.calls: list[dict[str, str]] = []

    def __call__(self, relaxed: Sequence[Relaxation]) -> _proc.Result:
        moved = {r.package: r.bound[:10] for r in relaxed}
        self.calls.append(moved)
        todo, seen = list(self.wanted), set()
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            bound = moved.get(name, BOUND[:10])
            if self.first.get(name, "2000-01-01") >= bound:
                how = "exclude-newer-package" if name in moved else "exclude-newer"
                return _proc.Result(["uv"], 1, b"", _hint(name, how).encode())
            if name in moved:
                todo += NEEDS.get(name, [])
        return _proc.Result(["uv"], 0, b"", b"")


def test_a_resolution_that_holds_within_the_bound_is_not_relaxed() -> None:
    uv = FakeUv(["jax"])
    got = resolve_within_bound(uv, BOUND)
    assert got.result.returncode == 0 and got.relaxed == () and len(uv.calls) == 1


def test_only_the_filtered_package_its_family_and_what_it_then_needs_move() -> None:
    uv = FakeUv(["jax", "jaxlib", "numpy"])
    got = resolve_within_bound(uv, BOUND, python="3.11")
    assert got.result.returncode == 0
    moved = {r.package: r.bound for r in got.relaxed}
    # jaxlib's oldest usable release is 2023-06-22: the first step past it (547 days).
    assert moved["jaxlib"] == "2023-07-24T00:00:00Z"
    # jax is released in lock-step with jaxlib: it moves with it, although it resolved.
    assert moved["jax"] == moved["jaxlib"]
    # ml-dtypes, needed by the newer jaxlib, moved from the step jaxlib had reached.
    assert "ml-dtypes" in moved and "numpy" not in moved
    why = {r.package: r.why for r in got.relaxed}
    assert why["jaxlib"] == "no release usable on Python 3.11 uploaded before 2022-01-23"
    assert why["jax"] == "released in lock-step with jaxlib"
    assert why["ml-dtypes"] == "the moved jaxlib needs a release uploaded after 2022-01-23"
    assert got.attempts == len(uv.calls) <= datebound.MAX_ATTEMPTS
    # The first attempt is the bound as it is.
    assert uv.calls[0] == {}


def test_no_bound_no_hint_or_no_step_left_gives_up_with_uvs_failure() -> None:
    def fails(relaxed: Sequence[Relaxation]) -> _proc.Result:
        return _proc.Result(["uv"], 1, b"", b"error: conflicting requirements\n")

    assert resolve_within_bound(fails, None).attempts == 1
    assert resolve_within_bound(fails, BOUND).result.returncode == 1
    never = FakeUv(["jaxlib"], {"jaxlib": "2099-01-01"})
    got = resolve_within_bound(never, BOUND)
    assert got.result.returncode == 1
    assert len(never.calls) <= len(datebound.STEP_DAYS) + 1


def test_packages_the_inputs_already_moved_are_left_to_them() -> None:
    uv = FakeUv(["jaxlib"])
    got = resolve_within_bound(uv, BOUND, kept={"jaxlib": "2022-02-01T00:00:00Z"})
    assert got.result.returncode == 1 and len(uv.calls) == 1


def test_uv_hints_are_read_for_the_global_and_the_per_package_bound() -> None:
    text = _hint("JaxLib") + _hint("torchdiffeq", "exclude-newer-package") + "no hint here\n"
    # With a previous lock, uv says it in the cause instead of a hint.
    text += "cause: Because ml_dtypes==0.3 was published after the exclude newer time and\n"
    assert datebound.filtered_by_bound(text) == ["jaxlib", "ml-dtypes", "torchdiffeq"]
    # Every release left under the bound yanked (PyPI's torchvision of 2019): move it too.
    yanked = (
        "we can conclude that torchvision<0.1.7 cannot be used.\n"
        "And because torchvision>=0.1.7 was yanked (reason: So that users won't ...) and\n"
    )
    assert datebound.filtered_by_bound(yanked) == ["torchvision"]
    assert datebound.filtered_by_bound("Because foo==1.0 was yanked (reason: x)") == ["foo"]
    assert datebound.relaxation_flags([Relaxation("jax", BOUND, "x")]) == [
        "--exclude-newer-package",
        f"jax={BOUND}",
    ]


def test_release_families_are_a_data_table_of_disjoint_canonical_names() -> None:
    families = load_packages()["release_families"]
    seen: set[str] = set()
    for members in families.values():
        for name in members:
            assert name == name.lower() and name not in seen, name
            seen.add(name)
    assert set(release_family("torchvision")) >= {"torch", "torchvision", "torchaudio"}
    assert release_family("JAX") == ("jax", "jaxlib")
    assert release_family("numpy") == ("numpy",)


def test_a_probe_of_the_named_packages_finds_the_steps_and_the_result_is_the_same() -> None:
    """A failed full resolution is slow (uv backtracks through everything that depends on
    the missing package: minutes for a jax notebook stack); the steps are found with a
    resolution of the named packages alone, and the full one runs once they resolve."""
    wanted = ["jax", "jaxlib", "numpy"]
    slow = FakeUv(wanted)
    without = resolve_within_bound(slow, BOUND)
    full, probe = FakeUv(wanted), FakeUv([])

    def probing(names: Sequence[str], relaxed: Sequence[Relaxation]) -> _proc.Result:
        probe.wanted = list(names)
        return probe(relaxed)

    got = resolve_within_bound(full, BOUND, probe=probing)
    assert got.result.returncode == 0 and got.relaxed == without.relaxed
    assert len(full.calls) == 2 < len(slow.calls)  # the bounded one, then the one that holds
    assert len(probe.calls) >= len(slow.calls) - 2

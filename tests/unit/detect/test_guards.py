"""Guarded (optional) imports: reprobridge.detect.derived._guards."""

from __future__ import annotations

import textwrap

import pytest

from reprobridge.detect.derived._guards import import_sites


def _guarded(source: str) -> dict[str, bool]:
    sites = import_sites(textwrap.dedent(source))
    assert sites is not None
    return {s.module: s.guarded for s in sites}


@pytest.mark.parametrize(
    "handler",
    [
        "ImportError",
        "ModuleNotFoundError",
        "(OSError, ImportError)",
        "Exception",
        "builtins.ImportError",
        "",
    ],
)
def test_a_handler_that_catches_a_failed_import_guards_the_try_body(handler: str) -> None:
    got = _guarded(
        f"""
        try:
            import fast
            from accel.ops import kernel
        except {handler}:
            fast = None
        """
    )
    assert got == {"fast": True, "accel.ops": True}


def test_other_handlers_and_the_fallback_branches_do_not_guard() -> None:
    got = _guarded(
        """
        try:
            import yaml
        except ValueError:
            pass
        try:
            import a
        except ImportError:
            import b
        else:
            import c
        finally:
            import d
        """
    )
    assert got == {"yaml": False, "a": True, "b": False, "c": False, "d": False}


def test_nesting_if_with_and_class_bodies_keep_the_guard_functions_do_not() -> None:
    got = _guarded(
        """
        try:
            if True:
                with open("x"):
                    import inner
            class K:
                import in_class
            def later():
                import in_function
        except ImportError:
            pass
        def f():
            try:
                import in_method_try
            except ImportError:
                pass
        """
    )
    assert got == {
        "inner": True,
        "in_class": True,
        "in_function": False,
        "in_method_try": True,
    }


def test_relative_imports_are_left_out_and_unparsable_source_is_none() -> None:
    assert _guarded("from . import x\nimport os\n") == {"os": False}
    assert import_sites("print 'python 2'\n") is None

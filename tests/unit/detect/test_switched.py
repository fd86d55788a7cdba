"""Prints switched off by every call (reprobridge.detect.procedure._switched)."""

from __future__ import annotations

import ast

import pytest

from reprobridge.detect.procedure._switched import Switch, print_switch, switched_off

LIB = """\
class Trainer:
    def __init__(self, model, verbose=True):
        self.verbose = verbose

    def fit(self):
        for i in range(3):
            if i % 10 == 0:
                if self.verbose:
                    print("Loss:", i)


def train(data, quiet, report=False):
    if report:
        print("loss:", data)
    else:
        print("nothing")
"""


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_switch_of_a_print() -> None:
    tree = ast.parse(LIB)
    assert print_switch(tree, _line(LIB, '"Loss:"')) == Switch("Trainer", "verbose", True, 1)
    assert print_switch(tree, _line(LIB, '"loss:"')) == Switch("train", "report", False, 2)
    assert print_switch(tree, _line(LIB, '"nothing"')) is None  # the else branch runs


@pytest.mark.parametrize(
    ("calls", "off"),
    [
        ("Trainer(m, verbose=False)\nTrainer(n, verbose=0)", True),
        ("Trainer(m, verbose=False)\nTrainer(n)", False),  # the default prints
        ("Trainer(m, False)", False),  # by position: not read
        ("Trainer(m, **opts)", False),
        ("Trainer(m, verbose=args.verbose)", False),
        ("", False),  # nobody builds it here: it may print
    ],
)
def test_a_class_switch_is_off_only_when_every_call_turns_it_off(calls: str, off: bool) -> None:
    switch = print_switch(ast.parse(LIB), _line(LIB, '"Loss:"'))
    assert switch is not None
    assert switched_off(switch, [ast.parse(calls)]) is off


def test_a_false_default_that_no_call_sets_is_off() -> None:
    switch = print_switch(ast.parse(LIB), _line(LIB, '"loss:"'))
    assert switch is not None
    assert switched_off(switch, [ast.parse("train(d, True)\ntrain(e, quiet=1)")])
    assert not switched_off(switch, [ast.parse("train(d, True, True)")])

"""CANN's own ATK cases (a sample of every suite) against our operators.

``tests/data/atk/sample.json.xz`` holds a few small cases of every ATK suite of
hicann/ops-math and hicann/ops-nn at the commits it records (``python tools/atk.py
sample`` makes it); ``tests/atk_driver.py`` says how a case runs and is judged, and
``tests/atk_goldens/`` holds the goldens. One test per suite runs all its sampled cases
and fails listing the cases that failed. A suite whose operator we do not implement, or
that has no golden yet, is skipped saying so; ``python tools/atk.py run`` runs every case
and writes the table of ``docs/atk.md``.
"""

from __future__ import annotations

import pytest

import atk_driver
from conftest import _start, _stop

CASES = atk_driver.load_sample()
SUITES = dict(atk_driver.by_suite(CASES))
GOLDENS = atk_driver.load_goldens()


@pytest.fixture
def inline_runtime():
    _start("inline")
    yield
    _stop()


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_atk_suite(suite, inline_runtime):
    tally = atk_driver.run_suite(SUITES[suite], GOLDENS, keep=10)
    if tally.run == 0:
        pytest.skip("; ".join(f"{n} case(s): {why}" for why, n in tally.not_run.items()))
    assert not tally.failures, (f"{tally.run - tally.passed} of {tally.run} case(s) failed:\n"
                                + "\n".join(tally.failures))


def test_the_sample_covers_every_suite_and_records_its_commits():
    import json
    import lzma

    with lzma.open(atk_driver.SAMPLE, "rt", encoding="utf-8") as handle:
        payload = json.load(handle)
    assert set(payload["repositories"]) == {"ops-math", "ops-nn"}
    assert all(len(r["commit"]) == 40 for r in payload["repositories"].values())
    assert len(SUITES) >= 470 and all(SUITES.values())


def test_a_golden_that_disagrees_fails_the_case(inline_runtime):
    """The driver can fail: a golden off by a little more than float32's standard allows."""
    case = next(c for c in CASES if c.op == "Add" and any(
        isinstance(i, dict) and i.get("dtype") == "fp32" for i in c.data["inputs"]))
    wrong = {"Add": atk_driver.Golden("Add", lambda a, b, alpha: (a + alpha * b) * 1.001)}
    right = {"Add": atk_driver.Golden("Add", lambda a, b, alpha: a + alpha * b)}
    atk_driver.run_case(case, right)
    with pytest.raises(AssertionError, match="MERE|MARE"):
        atk_driver.run_case(case, wrong)


def test_a_case_whose_kernel_fails_does_not_fail_the_next(inline_runtime):
    """Each case runs on a stream of its own: a kernel that fails poisons its stream for
    good (as on a device), and the next case must not inherit that."""
    import numpy as np
    import torch

    case = next(c for c in CASES if c.op == "Gather")

    def out_of_range(inputs):
        index = np.full_like(inputs[2], 10 ** 6)  # the kernel fails on the stream
        return [inputs[0], inputs[1], index]

    gather = lambda x, dim, index: torch.gather(x, dim, index)  # noqa: E731
    tally = atk_driver.run_suite([case], {"Gather": atk_driver.Golden(
        "Gather", gather, prepare=out_of_range)})
    assert tally.run == 1 and tally.passed == 0 and "507015" in tally.failures[0]
    right = {"Gather": atk_driver.Golden("Gather", gather)}
    assert atk_driver.run_suite([case, case], right).passed == 2


def test_the_topk_check_accepts_ties_and_catches_wrong_picks():
    """Topk is checked, not compared (ties): either of two equal elements may be taken, but
    a wrong value, a repeated index or an index that picks another value fails."""
    import numpy as np

    from atk_goldens.math import _check_topk

    x = np.array([[3.0, 7.0, 7.0, 1.0]], np.float32)
    inputs = [x, 2, -1, True, True]
    for picks in ([[1, 2]], [[2, 1]]):  # the tie taken either way
        _check_topk([np.array([[7.0, 7.0]], np.float32), np.array(picks)], inputs)
    _check_topk([np.array([[7.0, 7.0]], np.float32), np.array([[2, 1]])],
                [x, 2, -1, True, False])
    for values, picks in (([[7.0, 3.0]], [[1, 0]]),  # not the top two
                          ([[7.0, 7.0]], [[1, 1]]),  # one element taken twice
                          ([[7.0, 7.0]], [[1, 0]])):  # index 0 holds 3, not 7
        with pytest.raises(AssertionError):
            _check_topk([np.array(values, np.float32), np.array(picks)], inputs)

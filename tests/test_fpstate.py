"""The kernels' floating-point error state: ignored inside, the caller's own state intact."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from openacl.ops import fpstate


@pytest.mark.parametrize("fast", [True, False], ids=["context-variable", "np-errstate"])
def test_ignore_floating_point_inside_and_the_callers_state_after(fast, monkeypatch):
    if not fast:  # the fallback for a numpy without the context variable
        monkeypatch.setattr(fpstate, "_extobj_contextvar", None)
    one, zero = np.float32(1.0), np.float32(0.0)
    with np.errstate(divide="raise", over="warn"):
        with fpstate.ignore_floating_point():
            assert np.divide(one, zero) == np.inf  # no FloatingPointError
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert np.multiply(np.float32(3e38), np.float32(10.0)) == np.inf
        assert np.geterr()["divide"] == "raise" and np.geterr()["over"] == "warn"
        with pytest.raises(FloatingPointError):
            np.divide(one, zero)


def test_quiet_wraps_and_restores_even_on_error():
    @fpstate.quiet
    def divide_then_fail(a, b):
        result = np.divide(a, b)
        raise ValueError(str(result))

    with np.errstate(divide="raise"):
        with pytest.raises(ValueError, match="inf"):
            divide_then_fail(np.float32(1.0), np.float32(0.0))
        assert np.geterr()["divide"] == "raise"

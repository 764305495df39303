"""ONNX's backend node tests: every case the converter accepts gives ONNX's expected outputs
(the runner and the tally are in onnx_node_cases.py; docs/onnx-conformance.md shows the
table)."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

pytest.importorskip("onnx")

import onnx_node_cases  # noqa: E402

MIN_PASSED = 1500  # near the count when this was written: a drop means lost coverage


def test_every_accepted_node_case_passes():
    outcomes = onnx_node_cases.run_all()
    failed = [f"{o.name} ({o.op}): {o.detail[:200]}" for o in outcomes if o.status == "failed"]
    assert not failed, "\n".join(failed)
    counts = collections.Counter(o.status for o in outcomes)
    assert counts["passed"] >= MIN_PASSED, counts
    # a refusal is the converter's clear error, never a crash: each names what it refuses
    for outcome in outcomes:
        if outcome.status == "unsupported":
            assert "not supported" in outcome.detail or "only tensors" in outcome.detail
    # the table in docs/onnx-conformance.md is this run's (regenerate it when coverage changes)
    page = (Path(__file__).resolve().parents[1] / "docs" / "onnx-conformance.md").read_text(
        encoding="utf-8")
    assert onnx_node_cases.markdown(outcomes) in page

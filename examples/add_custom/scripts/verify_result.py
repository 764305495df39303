#!/usr/bin/env python3
"""Compare an output file with its golden under the samples' precision rule.

Usage: verify_result.py OUTPUT.bin GOLDEN.bin [--dtype float16]

The rule is the AscendC samples' (``openacl.tools.verify``, standard ``ratio``): an element
matches when ``np.isclose(output, golden, rtol=1e-3, atol=1e-5)`` (float16), and the run
passes when at most 0.1 % of the elements mismatch. Prints the first mismatches and
"test pass" or "[ERROR] result error"; exits 0 on pass, 1 on failure.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from openacl.tools.verify import verify


def verify_result(output: str, golden: str, dtype: str) -> bool:
    actual = np.fromfile(output, dtype=dtype)
    expected = np.fromfile(golden, dtype=dtype)
    if actual.size != expected.size:
        print(f"[ERROR] {output} holds {actual.size} {dtype} elements, {golden} holds "
              f"{expected.size}")
        return False
    report = verify(actual, expected, dtype, standard="ratio")
    print(report.format())
    return report.passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output")
    parser.add_argument("golden")
    parser.add_argument("--dtype", default="float16")
    args = parser.parse_args(argv)
    return 0 if verify_result(args.output, args.golden, args.dtype) else 1


if __name__ == "__main__":
    sys.exit(main())

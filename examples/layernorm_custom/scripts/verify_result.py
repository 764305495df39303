#!/usr/bin/env python3
"""Compare an output file with its golden under one of CANN's precision standards.

Usage: verify_result.py OUTPUT.bin GOLDEN.bin [--dtype float32] [--standard mixed]

Default standard ``mixed`` (``openacl.tools.verify``): CANN's ecosystem operator standard for
float32, an element passes if ``|a - g| <= 2^-16 + 2^-10 * |g|``, at least 99 % must pass
and the largest absolute error stays under its limit. A LayerNorm output has values near
zero that a relative rule cannot judge (the golden is float64, the kernel float32), which
is why this and not the samples' float32 ratio rule (rtol 1e-6) applies. Prints the report
and "test pass" or "[ERROR] result error"; exits 0 on pass, 1 on failure.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from openacl.tools.verify import STANDARDS, verify


def verify_result(output: str, golden: str, dtype: str, standard: str) -> bool:
    actual = np.fromfile(output, dtype=dtype)
    expected = np.fromfile(golden, dtype=dtype)
    if actual.size != expected.size:
        print(f"[ERROR] {output} holds {actual.size} {dtype} elements, {golden} holds "
              f"{expected.size}")
        return False
    report = verify(actual, expected, dtype, standard=standard)
    print(report.format())
    return report.passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output")
    parser.add_argument("golden")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--standard", default="mixed", choices=sorted(STANDARDS))
    args = parser.parse_args(argv)
    return 0 if verify_result(args.output, args.golden, args.dtype, args.standard) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compare an output file with its golden under one of CANN's precision standards.

Usage: verify_result.py OUTPUT.bin GOLDEN.bin [--dtype float32] [--standard single_benchmark]

Default standard ``single_benchmark`` (``openacl.tools.verify``): CANN's MERE/MARE standard, for
float32 mean relative error < 2^-13 and max relative error < 10 x 2^-13 against the float64
golden, with values below 2^-14 judged by absolute error. Prints the report and
"test pass" or "[ERROR] result error"; exits 0 on pass, 1 on failure.
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
    parser.add_argument("--standard", default="single_benchmark", choices=sorted(STANDARDS))
    args = parser.parse_args(argv)
    return 0 if verify_result(args.output, args.golden, args.dtype, args.standard) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Whether this machine's onnxruntime computes uint8 x int8 integer products exactly.

onnxruntime's AVX2 kernels for u8 x s8 products (MatMulInteger, QLinearConv, QLinearMatMul
with int8 weights) sum pairs of products in int16 with saturation (vpmaddubsw) where the CPU
has no VNNI; on such a CPU its result is not the exact one, so a bit-exact comparison with it
says nothing about ours. ``u8s8_saturates()`` probes that once per process.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

REASON = ("onnxruntime's u8 x s8 kernels on this CPU (AVX2, no VNNI) saturate int16 pair "
          "sums, so its result is not the exact one to compare with")


@functools.cache
def u8s8_saturates() -> bool:
    """A MatMulInteger whose pair sums pass int16: onnxruntime's answer against numpy's."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    a = np.full((1, 8), 255, np.uint8)
    b = np.full((8, 1), 127, np.int8)  # 255 * 127 * 2 = 64770 > 32767 per pair
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 8
    got = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    return not np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))


def assert_equal_or_skip(got: np.ndarray, want: np.ndarray) -> None:
    """``got == want`` to the bit, unless they differ because onnxruntime saturates here."""
    if not np.array_equal(got, want) and u8s8_saturates():
        pytest.skip(REASON)
    np.testing.assert_array_equal(got, want)

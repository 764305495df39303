"""Pack an fp32 ONNX model into float16 initializers (half the bytes) and unpack it back.

The GPU machine is reached with at most 64 MiB of files and no network; all-MiniLM-L6-v2 is
90 MB. ``pack`` stores every float32 initializer as float16 and ``unpack`` restores float32
(the values then differ from the original by float16 rounding, which changes no shape and no
latency; agreement checks on the GPU compare against onnxruntime running the *unpacked*
model, so they stay exact comparisons).

    python bench/gpu_model_carry.py pack \
        ../shared/models/all-MiniLM-L6-v2.seq128.onnx .gpu/minilm.f16.onnx
    python bench/gpu_model_carry.py unpack .gpu/minilm.f16.onnx /tmp/minilm.onnx
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import numpy_helper

PACKED_KEY = "openacl_packed_fp16"
PACK_MIN_ELEMENTS = 4096
FLOAT16_MAX = 65000.0


def pack(source: str, target: str) -> None:
    model = onnx.load(source)
    names = []
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.data_type != onnx.TensorProto.FLOAT:
            continue
        values = numpy_helper.to_array(tensor)
        # weights only: small constants (masks' -3.4e38, epsilons) stay float32
        if values.size >= PACK_MIN_ELEMENTS and np.abs(values).max() < FLOAT16_MAX:
            array = values.astype(np.float16)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(array, tensor.name))
            names.append(tensor.name)
    entry = model.metadata_props.add()
    entry.key, entry.value = PACKED_KEY, "\n".join(names)
    onnx.save(model, target)


def unpack(source: str, target: str) -> None:
    model = onnx.load(source)
    props = {p.key: p.value for p in model.metadata_props}
    packed = set(props.get(PACKED_KEY, "").split("\n"))
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name in packed:
            array = numpy_helper.to_array(tensor).astype(np.float32)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(array, tensor.name))
    onnx.save(model, target)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        sys.exit(__doc__)
    {"pack": pack, "unpack": unpack}[sys.argv[1]](sys.argv[2], sys.argv[3])

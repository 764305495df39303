"""Data-parallel inference and a tensor-parallel MLP over HCCL, checked against one rank.

Run it with ``openacl launch -n 2 main.py`` (run.sh does). Every rank:

1. data parallel: runs its share of a batch through one model (MiniLM from ../shared/models
   when that file is there, else a small ONNX MLP built here) and all-gathers the outputs,
   so each rank holds the whole batch's result; rank 0 checks it against running the whole
   batch alone;
2. tensor parallel: computes its part of ``relu(x @ w1) @ w2`` with w1 split by columns and
   w2 by rows, and all-reduces the partial sums; the result is checked against the unsplit
   product.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

import openacl
from openacl import hccl, rt

HERE = Path(__file__).resolve().parent
MINILM = HERE.parent.parent.parent / "shared" / "models" / "all-MiniLM-L6-v2.seq128.onnx"
BATCH_PER_RANK = 2  # sequences (or rows) each rank runs
SEQUENCE = 128  # MiniLM's fixed sequence length, tokens
VOCAB = 30522  # MiniLM's vocabulary size
MLP_IN, MLP_HIDDEN, MLP_OUT = 64, 128, 32  # the stand-in ONNX model's layer widths
TP_IN, TP_HIDDEN, TP_OUT, TP_ROWS = 48, 96, 40, 8  # the tensor-parallel MLP's sizes
RTOL, ATOL = 1e-4, 1e-5  # batch splitting may change summation blocking, not results


def build_mlp(path: Path) -> None:
    """A two-layer ONNX MLP (MatMul, Add, Relu, MatMul) with fixed random weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {"w1": rng.standard_normal((MLP_IN, MLP_HIDDEN), np.float32) * 0.1,
               "b1": rng.standard_normal(MLP_HIDDEN, np.float32) * 0.1,
               "w2": rng.standard_normal((MLP_HIDDEN, MLP_OUT), np.float32) * 0.1}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["a"]),
             helper.make_node("MatMul", ["a", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", MLP_IN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", MLP_OUT])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def model_and_batch(size: int) -> tuple[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(42)  # every rank builds the same whole batch
    rows = BATCH_PER_RANK * size
    if MINILM.exists():
        ids = rng.integers(1, VOCAB, (rows, SEQUENCE), dtype=np.int64)
        return str(MINILM), {"input_ids": ids, "attention_mask": np.ones_like(ids),
                             "token_type_ids": np.zeros_like(ids)}
    path = HERE / "output" / f"mlp_rank{os.environ.get('RANK', '0')}.onnx"
    path.parent.mkdir(exist_ok=True)
    build_mlp(path)
    return str(path), {"x": rng.standard_normal((rows, MLP_IN), np.float32)}


def device_copy(array: np.ndarray) -> openacl.DeviceBuffer:
    buffer = openacl.DeviceBuffer(array.nbytes)
    buffer.copy_from(np.ascontiguousarray(array).view(np.uint8))
    return buffer


def data_parallel(comm: hccl.Communicator, stream: openacl.Stream) -> str:
    model, batch = model_and_batch(comm.size)
    with openacl.InferenceSession(model) as session:
        return _gather_outputs(comm, stream, session, model, batch)


def _gather_outputs(comm: hccl.Communicator, stream: openacl.Stream, session, model: str,
                    batch: dict[str, np.ndarray]) -> str:
    mine = {name: value[comm.rank * BATCH_PER_RANK:(comm.rank + 1) * BATCH_PER_RANK]
            for name, value in batch.items()}
    local = np.ascontiguousarray(session.run(None, mine)[0], np.float32)
    send = device_copy(local)
    gathered = openacl.DeviceBuffer(local.nbytes * comm.size)
    hccl.all_gather(send, gathered, local.size, hccl.HCCL_DATA_TYPE_FP32, comm, stream)
    stream.synchronize()
    result = gathered.to_numpy(np.float32, (comm.size * BATCH_PER_RANK, *local.shape[1:]))
    whole = session.run(None, batch)[0]  # the one-rank reference
    np.testing.assert_allclose(result, whole, rtol=RTOL, atol=ATOL)
    send.free()
    gathered.free()
    return f"{Path(model).name}: {result.shape} gathered"


def tensor_parallel(comm: hccl.Communicator, stream: openacl.Stream) -> str:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((TP_ROWS, TP_IN), np.float32)
    w1 = rng.standard_normal((TP_IN, TP_HIDDEN), np.float32)
    w2 = rng.standard_normal((TP_HIDDEN, TP_OUT), np.float32)
    part = TP_HIDDEN // comm.size
    columns = slice(comm.rank * part, (comm.rank + 1) * part)
    partial = np.maximum(x @ w1[:, columns], 0) @ w2[columns, :]  # column then row split
    buffer = device_copy(partial.astype(np.float32))
    hccl.all_reduce(buffer, buffer, partial.size, hccl.HCCL_DATA_TYPE_FP32,
                    hccl.HCCL_REDUCE_SUM, comm, stream)
    stream.synchronize()
    np.testing.assert_allclose(buffer.to_numpy(np.float32, partial.shape),
                               np.maximum(x @ w1, 0) @ w2, rtol=RTOL, atol=1e-3)
    buffer.free()
    return f"MLP {TP_IN}->{TP_HIDDEN}->{TP_OUT} split {comm.size} ways"


def main() -> int:
    openacl.init()
    rt.set_device(0)
    try:
        with hccl.comm_init_from_env() as comm, openacl.Stream() as stream:
            print(f"rank {comm.rank}/{comm.size}: data parallel ok ({data_parallel(comm, stream)})")
            print(f"rank {comm.rank}/{comm.size}: tensor parallel ok "
                  f"({tensor_parallel(comm, stream)})")
    finally:
        openacl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())

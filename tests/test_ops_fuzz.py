"""Fuzz every registered operator's phase 1 with wrong arguments.

For each operator in ``openacl.ops.REGISTRY`` (collected when the tests are collected, so
every family that exists is covered) a fixed-seed generator builds about thirty calls of
``openacl.aclnn.<op>_get_workspace_size`` from the operator's declared parameters: a
plausible baseline call with one or two arguments replaced by something wrong for their
kind (null, bogus or stale handles, handles of another kind, absurd dtypes, wrong ranks and
shapes, huge dims, wrong-typed attributes, NaN, wrong outputs...), plus some calls where
every argument is random.

Each call must either raise ``AclError`` 161001/161002, or succeed; a success is then run
through phase 2 and the stream synchronized, where an ``AclError`` is fine but nothing else
is. ``ACLNN_ERR_INNER`` (561000) means an internal exception escaped phase 1 and is
reported as an operator bug, as is a kernel that crashes with an internal Python error
(TypeError, IndexError, a numpy broadcast failure...) on arguments phase 1 accepted.
All problems of one operator are collected and reported together.
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import openacl
from op_harness import strided
from openacl import aclnn
from openacl.errors import (
    ACLNN_ERR_INNER,
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    AclError,
)
from openacl.ops import REGISTRY
from openacl.ops.signature import Param
from openacl.runtime import core, memory

SEED = 20240611  # fixed: every run throws the same arguments at every operator
CASES_PER_OP = 30
MUTATE_ONE, MUTATE_TWO = 0.55, 0.85  # case kind thresholds; above: every argument random
SYNC_TIMEOUT_MS = 10_000  # a phase-2 task that runs longer than this is a hang
MAX_WORKSPACE_BYTES = 64 << 20  # a bigger workspace request is passed as a null pointer
PHASE1_CODES = frozenset({ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_PARAM_INVALID})
# operators whose CANN documentation gives another phase-1 code for some refusals
DOCUMENTED_CODES = {"BidirectionLSTM": {ACLNN_ERR_INNER_TILING_ERROR}}  # shapes: its tiling
BASE_SHAPE = (2, 3)
HUGE = 2 ** 40
OP_NAMES = sorted(REGISTRY)

BF16 = np.dtype(ml_dtypes.bfloat16)
PLAUSIBLE_DTYPES = [np.float32, np.float16, BF16, np.int32, np.int64, np.int8, np.uint8,
                    np.bool_, np.float64]
ABSURD_DTYPES = [np.uint32, np.uint16, np.uint64, np.complex64, np.complex128, np.bool_,
                 np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
                 np.int16, np.float64]
WRONG_SHAPES = [(5, 7), (), (0, 3), (3, 0, 2), (1,) * 8, (1,) * 9, (3, 1, 2), (4,),
                (2, 3, 1, 1, 1), (1, 1, 2, 3)]
# kernel failures that mean phase 1 accepted something the kernel cannot handle
INTERNAL_KERNEL_ERRORS = (TypeError, IndexError, KeyError, AttributeError, NameError,
                          AssertionError, UnboundLocalError, ZeroDivisionError)
INTERNAL_VALUE_ERROR_HINTS = ("broadcast", "could not be", "cannot reshape", "shape mismatch",
                              "axis", "too big", "negative dimensions")


class Pool:
    """Everything one case creates, released when the case is over (tensors must stay
    referenced until phase 2 ran, or their memory is freed under the executor)."""

    def __init__(self) -> None:
        self.tensors: list[openacl.Tensor] = []
        self.handles: list[tuple[Callable[[int], None], int]] = []
        self.pointers: list[int] = []

    def tensor(self, shape: tuple[int, ...], dtype: Any, rng: random.Random) -> openacl.Tensor:
        dtype = np.dtype(dtype)
        array = np.random.default_rng(rng.getrandbits(32)).uniform(-3, 3, shape)
        tensor = openacl.to_device(array.astype(np.float32).astype(dtype) if dtype.kind != "b"
                                   else array > 0)
        self.tensors.append(tensor)
        return tensor

    def output(self, shape: tuple[int, ...], dtype: Any) -> openacl.Tensor:
        tensor = openacl.empty(shape, dtype)
        self.tensors.append(tensor)
        return tensor

    def keep(self, tensor: openacl.Tensor) -> openacl.Tensor:
        self.tensors.append(tensor)
        return tensor

    def handle(self, handle: int, destroy: Callable[[int], None]) -> int:
        self.handles.append((destroy, handle))
        return handle

    def scalar(self, value: Any, data_type: Any) -> int:
        return self.handle(openacl.create_scalar(value, data_type), openacl.destroy_scalar)

    def meta_tensor(self, shape: tuple[int, ...], data_type: Any, data: int = 0,
                    strides: Any = None, fmt: Any = openacl.ACL_FORMAT_ND) -> int:
        """An aclTensor with no memory of its own (``data`` 0 means: address not set)."""
        return self.handle(openacl.create_tensor(shape, data_type, strides, 0, fmt, None, data),
                           openacl.destroy_tensor)

    def release(self) -> None:
        for destroy, handle in reversed(self.handles):
            try:
                destroy(handle)
            except AclError:
                pass  # already destroyed on purpose (a stale handle)
        for tensor in self.tensors:
            tensor.free()
        for pointer in self.pointers:
            memory.free(pointer)
        self.tensors, self.handles, self.pointers = [], [], []


class Fuzzer:
    """Builds baseline and wrong arguments for each parameter kind."""

    def __init__(self, rng: random.Random, pool: Pool) -> None:
        self.rng = rng
        self.pool = pool

    # -- plausible values ---------------------------------------------------------------------
    def baseline(self, param: Param) -> Any:
        rng, pool = self.rng, self.pool
        kind = param.kind
        if kind == "tensor":
            if param.output and not param.optional:
                return pool.output(BASE_SHAPE, np.float32)
            return pool.tensor(BASE_SHAPE, np.float32, rng)
        if kind == "tensors":
            return [pool.tensor(BASE_SHAPE, np.float32, rng) for _ in range(2)]
        if kind == "scalar":
            return pool.scalar(1.0, openacl.ACL_FLOAT)
        if kind == "scalars":
            return [pool.scalar(1.0, openacl.ACL_FLOAT)]
        return {
            "int": lambda: rng.choice([0, 1, -1, 2]),
            "float": lambda: rng.choice([0.5, 1e-5, 1.0]),
            "bool": lambda: rng.choice([False, True]),
            "str": lambda: rng.choice(["none", "mean", "sum", "tanh", ""]),
            "dtype": lambda: openacl.ACL_FLOAT,
            "int_array": lambda: rng.choice([[0], [1, 1], [-1], [1]]),
            "float_array": lambda: [1.0],
            "bool_array": lambda: [True],
        }[kind]()

    def random_plausible_tensor(self) -> openacl.Tensor:
        rank = self.rng.randint(0, 4)
        shape = tuple(self.rng.randint(0, 4) for _ in range(rank))
        return self.pool.tensor(shape, self.rng.choice(PLAUSIBLE_DTYPES), self.rng)

    # -- wrong values -------------------------------------------------------------------------
    def bogus_handle(self) -> Any:
        return self.rng.choice([0, -1, 1, 0xDEADBEEF, 2 ** 70, 0x5A000008, 0x5A0FFFF0])

    def stale_tensor(self) -> int:
        handle = openacl.create_tensor(BASE_SHAPE, openacl.ACL_FLOAT)
        openacl.destroy_tensor(handle)
        return handle

    def freed_memory_tensor(self) -> int:
        """A live aclTensor whose memory was freed (use after free at phase 2)."""
        pointer = memory.malloc(64)
        handle = self.pool.meta_tensor(BASE_SHAPE, openacl.ACL_FLOAT, pointer)
        memory.free(pointer)
        return handle

    def wrong_tensor(self, param: Param) -> Any:
        rng, pool = self.rng, self.pool
        choices: list[Callable[[], Any]] = [
            lambda: None,
            self.bogus_handle,
            lambda: rng.choice(["x", 1.5, [1, 2], True]),
            lambda: pool.scalar(2.0, openacl.ACL_FLOAT),  # a handle of the wrong kind
            lambda: pool.handle(openacl.create_int_array([1, 2]), openacl.destroy_int_array),
            self.stale_tensor,
            lambda: pool.tensor(BASE_SHAPE, rng.choice(ABSURD_DTYPES), rng),
            lambda: pool.tensor(rng.choice(WRONG_SHAPES), np.float32, rng),
            lambda: pool.tensor(rng.choice(WRONG_SHAPES), rng.choice(ABSURD_DTYPES), rng),
            self.random_plausible_tensor,
            lambda: pool.meta_tensor(BASE_SHAPE, openacl.ACL_FLOAT),  # address not set
            lambda: pool.meta_tensor(rng.choice([(HUGE,), (HUGE, 1024), (3, HUGE, 0),
                                                 (0, 2 ** 40, 2 ** 12)]), openacl.ACL_FLOAT),
            self.freed_memory_tensor,
            lambda: pool.keep(strided(np.arange(6, dtype=np.float32).reshape(BASE_SHAPE),
                                      rng.choice(["step", "transpose"]))),
            lambda: pool.meta_tensor((2, 3), openacl.ACL_FLOAT, pool.tensor((1,), np.float32,
                                                                          rng).data_ptr,
                                     strides=[0, 0]),  # every element aliases one
            lambda: pool.meta_tensor((1, 1, 2, 3, 16), openacl.ACL_FLOAT16,
                                     pool.tensor((96,), np.float16, rng).data_ptr,
                                     fmt=openacl.ACL_FORMAT_NC1HWC0),
        ]
        return rng.choice(choices)()

    def wrong_tensors(self, param: Param) -> Any:
        rng, pool = self.rng, self.pool
        good = pool.tensor(BASE_SHAPE, np.float32, rng)
        choices: list[Callable[[], Any]] = [
            lambda: None,
            lambda: [],
            lambda: [None],
            lambda: [good, self.bogus_handle()],
            lambda: [good, pool.scalar(1.0, openacl.ACL_FLOAT)],
            lambda: good,  # a tensor where a list is expected
            self.bogus_handle,
            lambda: "x",
            lambda: [good, pool.tensor(rng.choice(WRONG_SHAPES), np.float32, rng)],
            lambda: [good, pool.tensor(BASE_SHAPE, rng.choice(ABSURD_DTYPES), rng)],
            lambda: [self.random_plausible_tensor() for _ in range(rng.randint(1, 3))],
            lambda: [good] * 9,
            lambda: pool.handle(openacl.create_tensor_list([good, good]),
                                openacl.destroy_tensor_list),
            lambda: [good, self.wrong_tensor(param)],
        ]
        return rng.choice(choices)()

    def wrong_scalar(self, param: Param) -> Any:
        rng, pool = self.rng, self.pool
        choices: list[Callable[[], Any]] = [
            lambda: None,
            self.bogus_handle,
            lambda: rng.choice([1.5, "x", [1.0], 1j]),
            lambda: pool.tensor(BASE_SHAPE, np.float32, rng),  # a tensor, not a scalar
            lambda: pool.scalar(1 + 2j, openacl.ACL_COMPLEX64),
            lambda: pool.scalar(True, openacl.ACL_BOOL),
            lambda: pool.scalar(7, openacl.ACL_UINT32),
            lambda: pool.scalar(2 ** 62, openacl.ACL_INT64),
            lambda: pool.scalar(-128, openacl.ACL_INT8),
            lambda: pool.scalar(float("nan"), openacl.ACL_FLOAT),
            lambda: pool.scalar(float("-inf"), openacl.ACL_DOUBLE),
            lambda: pool.scalar(65504.0, openacl.ACL_FLOAT16),
            lambda: pool.scalar(0, openacl.ACL_INT32),
        ]
        return rng.choice(choices)()

    def wrong_scalars(self, param: Param) -> Any:
        rng, pool = self.rng, self.pool
        choices: list[Callable[[], Any]] = [
            lambda: None,
            lambda: [],
            lambda: [None],
            lambda: [pool.tensor(BASE_SHAPE, np.float32, rng)],
            lambda: [self.bogus_handle()],
            lambda: [self.wrong_scalar(param) for _ in range(rng.randint(1, 3))],
            lambda: 1.5,
        ]
        return rng.choice(choices)()

    def wrong_attribute(self, param: Param) -> Any:
        rng, pool = self.rng, self.pool
        tensor = lambda: pool.tensor(BASE_SHAPE, np.float32, rng)  # noqa: E731
        table: dict[str, list[Any]] = {
            "int": ["x", 1.5, None, True, [1, 2], 2 ** 62, -2 ** 62, -7, 2 ** 70,
                    np.int64(3), float("nan"), 127, -129],
            "float": ["x", None, float("nan"), float("inf"), float("-inf"), True, [1.0],
                      1e308, 1j, -1.0, 0.0],
            "bool": [1, "x", None, [True], 0.0],
            "str": [1, None, "bogus", "", b"none", ["mean"]],
            "dtype": ["x", 12345, -1, 13, 34, 29, None, 1.5, np.dtype("U4"),
                      openacl.ACL_UINT32, openacl.ACL_COMPLEX128, openacl.ACL_BOOL],
            "int_array": [None, ["a"], [1.5], [-1], [-100], [HUGE], [2 ** 70], [],
                          list(range(20)), [[1]], "abc", True, np.array([1.5]),
                          [0, 0, 0], [True], [-HUGE, HUGE]],
            "float_array": [None, ["x"], [float("nan")], [], [float("inf")], [1j], "x",
                            [1e308] * 9],
            "bool_array": [None, [1], ["x"], [], "x", [True] * 9],
        }
        choices: list[Any] = list(table[param.kind])
        choices += ["tensor", "bogus"]
        if param.kind == "int_array":
            choices.append("int_array_handle")
        choice = rng.choice(choices)
        if choice == "tensor":
            return tensor()
        if choice == "bogus":
            return self.bogus_handle()
        if choice == "int_array_handle":
            return pool.handle(openacl.create_int_array(rng.choice([[-5, HUGE], [], [0] * 10])),
                               openacl.destroy_int_array)
        return choice

    def wrong(self, param: Param) -> Any:
        if param.kind == "tensor":
            return self.wrong_tensor(param)
        if param.kind == "tensors":
            return self.wrong_tensors(param)
        if param.kind == "scalar":
            return self.wrong_scalar(param)
        if param.kind == "scalars":
            return self.wrong_scalars(param)
        return self.wrong_attribute(param)

    def arguments(self, params: tuple[Param, ...]) -> list[Any]:
        roll = self.rng.random()
        if roll < MUTATE_TWO and params:
            count = 1 if roll < MUTATE_ONE else 2
            mutated = set(self.rng.sample(range(len(params)), min(count, len(params))))
        else:
            mutated = set(range(len(params)))
        return [self.wrong(p) if i in mutated else self.baseline(p)
                for i, p in enumerate(params)]


def describe(value: Any) -> str:
    if isinstance(value, openacl.Tensor):
        return (f"Tensor(shape={list(value.shape)}, dtype={value.dtype}, "
                f"strides={list(value.strides)})") if value.handle is not None else "Tensor(freed)"
    if isinstance(value, list):
        return f"[{', '.join(describe(v) for v in value)}]"
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            obj = core.current().handles.get(value, object, "handle")
        except AclError:
            return repr(value)
        return f"{type(obj).__name__}({_short(obj)})"
    return repr(value)


def _short(obj: Any) -> str:
    if hasattr(obj, "view_dims"):
        return (f"dims={list(obj.view_dims)}, {obj.data_type.name}, strides={list(obj.strides)}"
                f", format={obj.format.name}, data={obj.data:#x}")
    if hasattr(obj, "value"):
        return f"{obj.value!r}, {obj.data_type.name}"
    if hasattr(obj, "values"):
        return repr(obj.values.tolist())
    return ""


def _internal_kernel_error(exc: AclError) -> BaseException | None:
    """The original exception of a failed phase-2 task when it is an internal crash."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, AclError):
        return None
    if isinstance(cause, INTERNAL_KERNEL_ERRORS):
        return cause
    if isinstance(cause, ValueError) and any(h in str(cause) for h in INTERNAL_VALUE_ERROR_HINTS):
        return cause
    return None


def run_case(op_name: str, args: list[Any], stream: int) -> tuple[str | None, bool]:
    """Run one fuzzed call; returns (problem or None, whether the stream failed)."""
    op = REGISTRY[op_name]
    shown = ", ".join(f"{p.name}={describe(a)}" for p, a in zip(op.params, args, strict=True))
    where = f"aclnn{op_name}({shown})"
    phase1 = getattr(aclnn, f"{op.snake_name}_get_workspace_size")
    phase2 = getattr(aclnn, op.snake_name)
    try:
        workspace_size, executor = phase1(*args)
    except AclError as exc:
        if exc.code == ACLNN_ERR_INNER:
            return f"phase 1 internal error (561000) escaped: {where}: {exc.message}", False
        if exc.code not in PHASE1_CODES | DOCUMENTED_CODES.get(op_name, set()):
            return f"phase 1 raised code {exc.code}, not 161001/161002: {where}: {exc}", False
        return None, False
    except Exception as exc:  # noqa: BLE001 - any other exception type is the bug we look for
        return (f"phase 1 raised {type(exc).__name__}: {exc}: {where}\n"
                f"{''.join(traceback.format_exception(exc)[-3:])}"), False
    workspace = 0
    try:
        if 0 < workspace_size <= MAX_WORKSPACE_BYTES:
            workspace = memory.malloc(workspace_size)
        phase2(workspace, workspace_size, executor, stream)
    except AclError:
        return None, False
    except Exception as exc:  # noqa: BLE001
        return (f"phase 2 raised {type(exc).__name__}: {exc}: {where}\n"
                f"{''.join(traceback.format_exception(exc)[-3:])}"), False
    finally:
        if workspace:
            memory.free(workspace)
    try:
        openacl.rt.synchronize_stream_with_timeout(stream, SYNC_TIMEOUT_MS)
    except AclError as exc:
        crash = _internal_kernel_error(exc)
        if crash is not None:
            return (f"kernel crashed with {type(crash).__name__} on arguments phase 1 "
                    f"accepted: {where}: {crash}"), True
        if "did not complete" in exc.message:
            return f"phase 2 hung: {where}: {exc.message}", True
        return None, True
    except Exception as exc:  # noqa: BLE001
        return f"synchronize raised {type(exc).__name__}: {exc}: {where}", True
    return None, False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("op_name", OP_NAMES)
def test_phase1_survives_wrong_arguments(threaded_runtime, op_name):
    rng = random.Random(f"{SEED}:{op_name}")
    pool = Pool()
    fuzzer = Fuzzer(rng, pool)
    stream = openacl.rt.create_stream()
    problems: list[str] = []
    try:
        for _ in range(CASES_PER_OP):
            try:
                args = fuzzer.arguments(REGISTRY[op_name].params)
                problem, stream_failed = run_case(op_name, args, stream)
            finally:
                pool.release()
            if problem is not None:
                problems.append(problem)
            if stream_failed:  # a failed stream skips later tasks: start a fresh one
                openacl.rt.destroy_stream_force(stream)
                stream = openacl.rt.create_stream()
    finally:
        openacl.rt.destroy_stream_force(stream)
    assert not problems, f"{len(problems)} of {CASES_PER_OP} cases:\n" + "\n".join(problems)


def test_every_operator_is_fuzzed():
    """The fuzz list is the registry (an operator family that failed to import would show
    here as a collection error, not a silently shorter list)."""
    assert OP_NAMES and OP_NAMES == sorted(REGISTRY)


@pytest.mark.parametrize("shape", [(-1, 3), (2, -5), (HUGE, HUGE), (0, HUGE, HUGE)])
def test_negative_dims_are_rejected_at_tensor_creation(threaded_runtime, shape):
    """Negative dims, and dims whose byte size overflows int64, never reach an operator:
    aclCreateTensor refuses them."""
    with pytest.raises(AclError):
        openacl.create_tensor(shape, openacl.ACL_FLOAT)

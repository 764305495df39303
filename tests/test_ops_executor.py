"""aclOpExecutor rules: single use, repeatable with new addresses, destroy, workspace checks,
streams and threads, and memory freed under an executor.

Tensors passed to phase 1 are kept referenced until phase 2 has run: a temporary would be
garbage-collected and its memory freed, which the runtime (correctly) reports as a use
after free.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import openacl
from openacl import aclnn
from openacl.errors import ACLNN_ERR_INNER_NULLPTR, ACLNN_ERR_PARAM_INVALID, AclError
from openacl.ops.call import Call, Kernel
from openacl.ops.dispatch import phase1, phase2
from openacl.ops.registry import OpDef
from openacl.ops.signature import parse_signature
from openacl.runtime import memory
from openacl.tensor import ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE

SHAPE = (2, 3)
FLOAT_BYTES = 4
NBYTES = 6 * FLOAT_BYTES  # one float32 tensor of SHAPE
THREAD_JOIN_S = 10.0  # a worker thread that takes longer than this is a hang


def _dev(array) -> openacl.Tensor:
    return openacl.to_device(np.asarray(array, np.float32))


def _values(start: float) -> np.ndarray:
    return (np.arange(6, dtype=np.float32) + start).reshape(SHAPE)


def _write(pointer: int, array: np.ndarray) -> None:
    host = np.ascontiguousarray(array)
    memory.memcpy(pointer, host.nbytes, memory.register_buffer(host), host.nbytes,
                  ACL_MEMCPY_HOST_TO_DEVICE)


def _read(pointer: int, shape=SHAPE, dtype=np.float32) -> np.ndarray:
    host = np.empty(shape, dtype)
    memory.memcpy(memory.register_buffer(host), host.nbytes, pointer, host.nbytes,
                  ACL_MEMCPY_DEVICE_TO_HOST)
    return host


def _sync() -> None:
    openacl.rt.synchronize_device()


class Bound:
    """One phase-1 call of aclnnAdd (or Mul) over live tensors."""

    def __init__(self, op: str = "add", a=None, b=None) -> None:
        self.a = _dev(_values(1) if a is None else a)
        self.b = _dev(_values(10) if b is None else b)
        self.out = openacl.empty(SHAPE, np.float32)
        if op == "add":
            self.workspace_size, self.executor = aclnn.add_get_workspace_size(
                self.a, self.b, None, self.out)
        else:
            self.workspace_size, self.executor = getattr(aclnn, f"{op}_get_workspace_size")(
                self.a, self.b, self.out)


# -- single use --------------------------------------------------------------------------------
def test_executor_is_single_use(runtime):
    call = Bound()
    aclnn.add(0, call.workspace_size, call.executor, 0)
    _sync()
    np.testing.assert_array_equal(call.out.numpy(), _values(1) + _values(10))
    with pytest.raises(AclError) as info:
        aclnn.add(0, call.workspace_size, call.executor, 0)
    assert info.value.code == ACLNN_ERR_INNER_NULLPTR
    assert "single-use" in info.value.message and "repeatable" in info.value.message


def test_unary_executor_single_use(runtime):
    x, out = _dev(_values(0) / 10), openacl.empty(SHAPE, np.float32)
    ws, exe = aclnn.exp_get_workspace_size(x, out)
    aclnn.exp(0, ws, exe, None)
    np.testing.assert_allclose(out.numpy(), np.exp(_values(0) / 10), rtol=1e-6)
    with pytest.raises(AclError) as info:
        aclnn.exp(0, ws, exe, None)
    assert info.value.code == ACLNN_ERR_INNER_NULLPTR


def test_consumed_executor_cannot_be_made_repeatable(threaded_runtime):
    call = Bound()
    aclnn.add(0, call.workspace_size, call.executor, 0)
    for action in (lambda: aclnn.set_executor_repeatable(call.executor),
                   lambda: aclnn.destroy_executor(call.executor),
                   lambda: aclnn.set_input_tensor_addr(call.executor, 0, None,
                                                       call.a.data_ptr)):
        with pytest.raises(AclError) as info:
            action()
        assert info.value.code == ACLNN_ERR_INNER_NULLPTR


# -- repeatable ----------------------------------------------------------------------------------
def test_repeatable_runs_many_times(runtime):
    call = Bound("mul")
    aclnn.set_executor_repeatable(call.executor)
    for step in range(5):
        _write(call.a.data_ptr, _values(step))
        aclnn.mul(0, call.workspace_size, call.executor, 0)
        _sync()
        np.testing.assert_array_equal(call.out.numpy(), _values(step) * _values(10))
    aclnn.destroy_executor(call.executor)


def test_repeatable_launches_queue_in_order(threaded_runtime):
    """Launch many times before synchronizing: each queued run sees the memory as it is
    when it runs, so the last one wins and nothing is lost or crashes."""
    x, out = _dev(_values(0)), openacl.empty(SHAPE, np.float32)
    ws, exe = aclnn.neg_get_workspace_size(x, out)
    aclnn.set_executor_repeatable(exe)
    for _ in range(50):
        aclnn.neg(0, ws, exe, 0)
    _sync()
    np.testing.assert_array_equal(out.numpy(), -_values(0))
    aclnn.destroy_executor(exe)


def test_new_input_and_output_addresses(runtime):
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    aclnn.add(0, call.workspace_size, call.executor, 0)
    _sync()
    other_input, other_output = memory.malloc(NBYTES), memory.malloc(NBYTES)
    try:
        _write(other_input, _values(100))
        aclnn.set_input_tensor_addr(call.executor, 0, None, other_input)
        aclnn.add(0, call.workspace_size, call.executor, 0)
        _sync()
        np.testing.assert_array_equal(call.out.numpy(), _values(100) + _values(10))

        aclnn.set_output_tensor_addr(call.executor, 0, None, other_output)
        before = call.out.numpy()
        aclnn.add(0, call.workspace_size, call.executor, 0)
        _sync()
        np.testing.assert_array_equal(_read(other_output), _values(100) + _values(10))
        np.testing.assert_array_equal(call.out.numpy(), before)  # old output untouched

        # set_tensor_addr counts inputs then outputs: 1 is `other`, 2 is `out`
        aclnn.set_tensor_addr(call.executor, 1, None, call.a.data_ptr)
        aclnn.set_tensor_addr(call.executor, 2, None, call.out.data_ptr)
        aclnn.add(0, call.workspace_size, call.executor, 0)
        _sync()
        np.testing.assert_array_equal(call.out.numpy(), _values(100) + _values(1))
    finally:
        aclnn.destroy_executor(call.executor)
        memory.free(other_input)
        memory.free(other_output)


def test_new_address_with_a_matching_tensor(threaded_runtime):
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    replacement = _dev(_values(50))
    aclnn.set_input_tensor_addr(call.executor, 1, replacement, replacement.data_ptr)
    aclnn.add(0, call.workspace_size, call.executor, 0)
    _sync()
    np.testing.assert_array_equal(call.out.numpy(), _values(1) + _values(50))
    aclnn.destroy_executor(call.executor)


@pytest.mark.parametrize("setter,index", [
    ("set_input_tensor_addr", 2), ("set_input_tensor_addr", -1),
    ("set_output_tensor_addr", 1), ("set_tensor_addr", 3), ("set_tensor_addr", "0"),
    ("set_input_tensor_addr", 0.0), ("set_input_tensor_addr", None),
])
def test_bad_index_is_rejected(threaded_runtime, setter, index):
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    with pytest.raises(AclError) as info:
        getattr(aclnn, setter)(call.executor, index, None, call.a.data_ptr)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID
    assert "index" in info.value.message
    aclnn.destroy_executor(call.executor)


@pytest.mark.parametrize("shape,dtype", [((3, 2), np.float32), ((2, 3), np.float16),
                                         ((6,), np.float32)])
def test_tensor_not_matching_the_slot_is_rejected(threaded_runtime, shape, dtype):
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    other = openacl.empty(shape, dtype)
    with pytest.raises(AclError) as info:
        aclnn.set_input_tensor_addr(call.executor, 0, other, other.data_ptr)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID
    # the executor still runs with its old addresses
    aclnn.add(0, call.workspace_size, call.executor, 0)
    _sync()
    np.testing.assert_array_equal(call.out.numpy(), _values(1) + _values(10))
    aclnn.destroy_executor(call.executor)


@pytest.mark.parametrize("addr", ["x", None, 1.5, True])
def test_non_pointer_address_is_rejected(threaded_runtime, addr):
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    with pytest.raises(AclError) as info:
        aclnn.set_input_tensor_addr(call.executor, 0, None, addr)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID
    aclnn.destroy_executor(call.executor)


def test_address_of_too_small_allocation_is_rejected(threaded_runtime):
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    small = memory.malloc(NBYTES // 2)
    try:
        for setter, index in (("set_input_tensor_addr", 0), ("set_output_tensor_addr", 0),
                              ("set_tensor_addr", 2)):
            with pytest.raises(AclError):
                getattr(aclnn, setter)(call.executor, index, None, small)
        with pytest.raises(AclError):  # a wild pointer
            aclnn.set_input_tensor_addr(call.executor, 0, None, 0xDEAD0000)
        # nothing changed: the executor still computes from its own memory
        aclnn.add(0, call.workspace_size, call.executor, 0)
        _sync()
        np.testing.assert_array_equal(call.out.numpy(), _values(1) + _values(10))
    finally:
        aclnn.destroy_executor(call.executor)
        memory.free(small)


def test_queued_run_keeps_its_addresses(threaded_runtime, gate):
    """An address change affects only later launches, not one already queued."""
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    stream = openacl.rt.create_stream()
    other_output = memory.malloc(NBYTES)
    try:
        openacl.rt.launch_host_func(stream, gate.task)
        aclnn.add(0, call.workspace_size, call.executor, stream)
        aclnn.set_output_tensor_addr(call.executor, 0, None, other_output)
        _write(other_output, np.zeros(SHAPE, np.float32))
        gate.open()
        openacl.rt.synchronize_stream(stream)
        np.testing.assert_array_equal(call.out.numpy(), _values(1) + _values(10))
        np.testing.assert_array_equal(_read(other_output), np.zeros(SHAPE, np.float32))
    finally:
        openacl.rt.destroy_stream(stream)
        aclnn.destroy_executor(call.executor)
        memory.free(other_output)


# -- destroy and mismatched executors --------------------------------------------------------------
def test_destroyed_executor_cannot_be_used(runtime):
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    aclnn.add(0, call.workspace_size, call.executor, 0)
    aclnn.destroy_executor(call.executor)
    for action in (lambda: aclnn.add(0, call.workspace_size, call.executor, 0),
                   lambda: aclnn.destroy_executor(call.executor),
                   lambda: aclnn.set_output_tensor_addr(call.executor, 0, None,
                                                        call.out.data_ptr)):
        with pytest.raises(AclError) as info:
            action()
        assert info.value.code == ACLNN_ERR_INNER_NULLPTR
    _sync()


@pytest.mark.parametrize("executor", [0, -1, 0xDEADBEEF, "x", None, 1.5])
def test_bogus_executor_is_rejected(threaded_runtime, executor):
    with pytest.raises(AclError) as info:
        aclnn.add(0, 0, executor, 0)
    assert info.value.code == ACLNN_ERR_INNER_NULLPTR


def test_executor_of_another_operator_is_rejected(runtime):
    call = Bound("mul")
    with pytest.raises(AclError) as info:
        aclnn.add(0, call.workspace_size, call.executor, 0)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID
    assert "aclnnMul" in info.value.message
    # the rejected launch did not consume it: it still runs as a Mul
    aclnn.mul(0, call.workspace_size, call.executor, 0)
    _sync()
    np.testing.assert_array_equal(call.out.numpy(), _values(1) * _values(10))


def test_tensor_handle_is_not_an_executor(threaded_runtime):
    call = Bound()
    with pytest.raises(AclError) as info:
        aclnn.add(0, 0, call.a, 0)
    assert info.value.code == ACLNN_ERR_INNER_NULLPTR
    aclnn.add(0, call.workspace_size, call.executor, 0)
    _sync()


# -- workspace -------------------------------------------------------------------------------------
SCRATCH_BYTES = 512  # workspace the probe operator asks for


def _scratch_prepare(c: Call) -> Kernel:
    """out = 2 * self, staged through the workspace (which must be big enough)."""
    c.check_dtype("self", {np.dtype(np.float32)})
    c.check_out("out", c.tensor("self").shape, np.dtype(np.float32))
    c.workspace_bytes = SCRATCH_BYTES

    def kernel(v) -> None:
        scratch = v.workspace.view(np.float32)
        flat = v["self"].reshape(-1)
        scratch[:flat.size] = flat * 2
        v.write("out", scratch[:flat.size].reshape(v["out"].shape))
    return kernel


# Not registered: the registry (and the fuzz test over it) stays the library's own.
SCRATCH_OP = OpDef("ScratchProbe", parse_signature("self: tensor, out: tensor!"),
                   _scratch_prepare)


def _workspace_op() -> tuple[OpDef, dict]:
    x, out = _dev(_values(3)), openacl.empty(SHAPE, np.float32)
    return SCRATCH_OP, {"self": x, "out": out}


def test_workspace_is_used_and_checked(runtime):
    op, raw = _workspace_op()
    workspace_size, executor = phase1(op, raw)
    assert workspace_size == SCRATCH_BYTES
    for bad_size in (0, SCRATCH_BYTES - 1):
        with pytest.raises(AclError) as info:
            phase2(op, 0, bad_size, executor, 0)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID
        assert "workspaceSize" in info.value.message
    with pytest.raises(AclError):  # the size is right but there is no memory behind it
        phase2(op, 0, workspace_size, executor, 0)
    small = memory.malloc(SCRATCH_BYTES // 2)
    workspace = memory.malloc(workspace_size)
    try:
        with pytest.raises(AclError):  # an allocation smaller than it claims
            phase2(op, small, workspace_size, executor, 0)
        phase2(op, workspace, workspace_size, executor, 0)  # failures did not consume it
        _sync()
        np.testing.assert_array_equal(raw["out"].numpy(), _values(3) * 2)
    finally:
        memory.free(workspace)
        memory.free(small)


def test_registered_operators_with_workspace_reject_a_small_one(threaded_runtime):
    """Any library operator that asks for a workspace on a plain float32 call is checked
    the same way (skipped while none does)."""
    from openacl.ops import REGISTRY

    checked = 0
    for op in REGISTRY.values():
        if [p.kind for p in op.params] != ["tensor", "tensor"] or not op.params[1].output:
            continue
        x, out = _dev(_values(0) / 10), openacl.empty(SHAPE, np.float32)
        try:
            workspace_size, executor = phase1(op, {p.name: t for p, t in
                                                   zip(op.params, (x, out), strict=True)})
        except AclError:
            continue
        if workspace_size == 0:
            aclnn.destroy_executor(executor)
            continue
        with pytest.raises(AclError) as info:
            phase2(op, 0, workspace_size - 1, executor, 0)
        assert info.value.code == ACLNN_ERR_PARAM_INVALID
        aclnn.destroy_executor(executor)
        checked += 1
    if not checked:
        pytest.skip("no registered unary operator asks for a workspace")


@pytest.mark.parametrize("size", [-1, -SCRATCH_BYTES, "x", 1.5, None])
def test_bad_workspace_size_is_rejected(threaded_runtime, size):
    call = Bound()
    with pytest.raises(AclError):
        aclnn.add(0, size, call.executor, 0)
    aclnn.add(0, call.workspace_size, call.executor, 0)  # not consumed by the failure
    _sync()
    np.testing.assert_array_equal(call.out.numpy(), _values(1) + _values(10))


# -- streams and threads ---------------------------------------------------------------------------
def test_phase2_on_a_created_stream(runtime):
    stream = openacl.rt.create_stream()
    try:
        call = Bound()
        aclnn.add(0, call.workspace_size, call.executor, stream)
        openacl.rt.synchronize_stream(stream)
        np.testing.assert_array_equal(call.out.numpy(stream), _values(1) + _values(10))
    finally:
        openacl.rt.destroy_stream(stream)


def test_phase2_is_asynchronous(threaded_runtime, gate):
    stream = openacl.rt.create_stream()
    try:
        call = Bound()
        _write(call.out.data_ptr, np.zeros(SHAPE, np.float32))
        openacl.rt.launch_host_func(stream, gate.task)
        aclnn.add(0, call.workspace_size, call.executor, stream)  # returns at once
        assert gate.entered.wait(THREAD_JOIN_S)
        np.testing.assert_array_equal(_read(call.out.data_ptr), np.zeros(SHAPE, np.float32))
        gate.open()
        openacl.rt.synchronize_stream(stream)
        np.testing.assert_array_equal(_read(call.out.data_ptr), _values(1) + _values(10))
    finally:
        gate.open()
        openacl.rt.destroy_stream(stream)


def test_phase2_from_another_thread(runtime):
    """Phase 1 on one thread, phase 2 on another (with its own current context), on a
    stream created by the first; results are defined after synchronize."""
    context = openacl.rt.get_context()
    stream = openacl.rt.create_stream()
    calls = [Bound("mul", _values(i), _values(-i)) for i in range(4)]
    errors: list[BaseException] = []

    def worker(call: Bound) -> None:
        try:
            openacl.rt.set_context(context)
            aclnn.mul(0, call.workspace_size, call.executor, stream)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(c,)) for c in calls]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(THREAD_JOIN_S)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors
        openacl.rt.synchronize_stream(stream)
        for i, call in enumerate(calls):
            np.testing.assert_array_equal(call.out.numpy(), _values(i) * _values(-i))
    finally:
        openacl.rt.destroy_stream(stream)


def test_repeatable_executor_on_two_streams(runtime):
    call = Bound()
    aclnn.set_executor_repeatable(call.executor)
    streams = [openacl.rt.create_stream() for _ in range(2)]
    try:
        for i, stream in enumerate(streams):
            _sync()
            _write(call.a.data_ptr, _values(i * 7))
            aclnn.add(0, call.workspace_size, call.executor, stream)
            openacl.rt.synchronize_stream(stream)
            np.testing.assert_array_equal(call.out.numpy(), _values(i * 7) + _values(10))
    finally:
        for stream in streams:
            openacl.rt.destroy_stream(stream)
        aclnn.destroy_executor(call.executor)


# -- memory freed under an executor ----------------------------------------------------------------
def test_input_freed_between_phases_is_a_clean_error(runtime):
    a, b = _dev(_values(1)), _dev(_values(2))
    out = openacl.empty(SHAPE, np.float32)
    ws, exe = aclnn.add_get_workspace_size(a, b, None, out)
    a.free()
    with pytest.raises(AclError) as info:
        aclnn.add(0, ws, exe, 0)
    assert "self" in info.value.message


def test_output_freed_between_phases_is_a_clean_error(runtime):
    x = _dev(_values(1))
    pointer = memory.malloc(NBYTES)
    out = openacl.create_tensor(SHAPE, openacl.ACL_FLOAT, None, 0, openacl.ACL_FORMAT_ND, None,
                                pointer)
    ws, exe = aclnn.abs_get_workspace_size(x, out)
    memory.free(pointer)
    with pytest.raises(AclError) as info:
        aclnn.abs(0, ws, exe, 0)
    assert "out" in info.value.message
    openacl.destroy_tensor(out)


def _raw_tensor(pointer: int) -> int:
    return openacl.create_tensor(SHAPE, openacl.ACL_FLOAT, None, 0, openacl.ACL_FORMAT_ND, None,
                                 pointer)


@pytest.mark.parametrize("new_size", [NBYTES // 2, NBYTES, 4 * NBYTES])
def test_repeatable_cache_is_not_used_after_free(runtime, new_size):
    """Run a repeatable executor (its views are cached), free its input, allocate again
    (the allocator may hand back the same address) and run: an error when the address is
    dead or too small, else a result computed from the new allocation; never the old,
    stale memory."""
    pointer = memory.malloc(NBYTES)
    _write(pointer, _values(1))
    source = _raw_tensor(pointer)
    other, out = _dev(_values(10)), openacl.empty(SHAPE, np.float32)
    ws, exe = aclnn.add_get_workspace_size(source, other, None, out)
    aclnn.set_executor_repeatable(exe)
    new_pointer = None
    try:
        for _ in range(2):  # the second launch runs from the cache
            aclnn.add(0, ws, exe, 0)
        _sync()
        np.testing.assert_array_equal(out.numpy(), _values(1) + _values(10))
        memory.free(pointer)
        new_pointer = memory.malloc(new_size)
        reused = new_pointer == pointer
        if new_size >= NBYTES:
            _write(new_pointer, _values(100))
        _write(out.data_ptr, np.zeros(SHAPE, np.float32))
        if reused and new_size >= NBYTES:
            aclnn.add(0, ws, exe, 0)
            _sync()
            np.testing.assert_array_equal(out.numpy(), _values(100) + _values(10))
        else:
            with pytest.raises(AclError):
                aclnn.add(0, ws, exe, 0)
                _sync()
            np.testing.assert_array_equal(out.numpy(), np.zeros(SHAPE, np.float32))
    finally:
        aclnn.destroy_executor(exe)
        openacl.destroy_tensor(source)
        if new_pointer is not None:
            memory.free(new_pointer)


def test_repeatable_cache_after_output_free(threaded_runtime):
    x = _dev(_values(1))
    pointer = memory.malloc(NBYTES)
    out = _raw_tensor(pointer)
    ws, exe = aclnn.neg_get_workspace_size(x, out)
    aclnn.set_executor_repeatable(exe)
    try:
        aclnn.neg(0, ws, exe, 0)
        aclnn.neg(0, ws, exe, 0)
        _sync()
        np.testing.assert_array_equal(_read(pointer), -_values(1))
        memory.free(pointer)
        with pytest.raises(AclError):
            aclnn.neg(0, ws, exe, 0)
            _sync()
        # a new address brings it back
        fresh = openacl.empty(SHAPE, np.float32)
        aclnn.set_output_tensor_addr(exe, 0, None, fresh.data_ptr)
        aclnn.neg(0, ws, exe, 0)
        _sync()
        np.testing.assert_array_equal(fresh.numpy(), -_values(1))
    finally:
        aclnn.destroy_executor(exe)
        openacl.destroy_tensor(out)


def test_queued_run_keeps_freed_memory_alive(threaded_runtime, gate):
    """Freeing an input after phase 2 queued the run is safe: the task holds the memory."""
    stream = openacl.rt.create_stream()
    try:
        a, b = _dev(_values(1)), _dev(_values(2))
        out = openacl.empty(SHAPE, np.float32)
        ws, exe = aclnn.add_get_workspace_size(a, b, None, out)
        openacl.rt.launch_host_func(stream, gate.task)
        aclnn.add(0, ws, exe, stream)
        a.free()
        b.free()
        gate.open()
        openacl.rt.synchronize_stream(stream)
        np.testing.assert_array_equal(out.numpy(), _values(1) + _values(2))
    finally:
        gate.open()
        openacl.rt.destroy_stream(stream)

"""KernelLaunch: ``kernel[block_dim, stream](...)`` / ``kernel[block_dim, l2ctrl, stream]``
with device pointers, Tensors and scalars, asynchronous, covering every element once,
bounds-checked global buffers, and clean errors for bad launches and failing blocks.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import openacl
from device_io import to_host
from op_harness import strided
from openacl import custom
from openacl.custom import get_block_idx, get_block_num, global_buffer
from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_AICORE_EXCEPTION

GATE_WAIT_S = 5.0  # longest wait for a gate task to start
SETTLE_S = 0.05  # time a wrongly eager kernel would have had to run, seconds


def span(n: int) -> tuple[int, int]:
    per_block = -(-n // get_block_num())
    start = min(n, get_block_idx() * per_block)
    return start, min(n, start + per_block)


@custom.kernel
def add_kernel(x, y, z, n):
    """z = x + y over float32 device pointers, n elements split over the blocks."""
    start, stop = span(n)
    xs, ys, zs = (global_buffer(p, np.float32, n) for p in (x, y, z))
    zs[start:stop] = xs[start:stop] + ys[start:stop]


def check_error(code: int, *fragments: str):
    class _Check:
        def __enter__(self):
            self._ctx = pytest.raises(openacl.AclError)
            self.info = self._ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self._ctx.__exit__(*exc)
            assert self.info.value.code == code, str(self.info.value)
            for fragment in fragments:
                assert fragment in str(self.info.value), (fragment, str(self.info.value))
            return handled
    return _Check()


def data(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-4, 4, n).astype(np.float32)


@pytest.mark.parametrize("l2ctrl", [False, True])
def test_launch_with_device_pointers(runtime, l2ctrl):
    n = 8 * 2048
    x, y = openacl.to_device(data(n, 1)), openacl.to_device(data(n, 2))
    z = openacl.rt.malloc(n * 4)
    stream = openacl.Stream()
    launch = add_kernel[8, None, stream] if l2ctrl else add_kernel[8, stream]
    assert launch(x.data_ptr, y.data_ptr, z, n) is None
    stream.synchronize()
    np.testing.assert_array_equal(to_host(global_buffer(z, np.float32, n)),
                                  data(n, 1) + data(n, 2))
    openacl.rt.free(z)


def test_launch_on_default_stream_and_launch_kernel(runtime):
    n = 100
    x = openacl.to_device(data(n))
    z = openacl.empty((n,), np.float32)
    add_kernel[3, None](x.data_ptr, x.data_ptr, z.data_ptr, n)
    openacl.rt.synchronize_stream(0)
    np.testing.assert_array_equal(z.numpy(), 2 * data(n))
    y = openacl.empty((n,), np.float32)
    custom.launch_kernel(add_kernel, 2, 0, x.data_ptr, z.data_ptr, y.data_ptr, n)
    custom.launch_kernel(add_kernel.fn, 2, 0, y.data_ptr, z.data_ptr, y.data_ptr, n)
    openacl.rt.synchronize_stream(0)
    host = data(n)
    np.testing.assert_array_equal(y.numpy(), (host + 2 * host) + 2 * host)


def test_tensors_become_numpy_views_and_scalars_pass_through(runtime):
    seen = []

    @custom.kernel
    def axpy(alpha, x, y, out, note):
        seen.append((type(alpha), type(x), x.shape, x.dtype, note))
        start, stop = span(out.shape[0])
        out[start:stop] = alpha * x[start:stop] + y[start:stop]

    x, y = data(12).reshape(6, 2), data(12, 1).reshape(6, 2)
    out = openacl.empty((6, 2), np.float32)
    axpy[2, 0](np.float32(3.0), openacl.to_device(x), openacl.to_device(y), out, "tag")
    openacl.rt.synchronize_stream(0)
    np.testing.assert_allclose(out.numpy(), 3 * x + y, rtol=1e-6)
    arrays = openacl.runtime.core.current().backend.array_module(None).ndarray  # numpy, cupy
    assert seen == [(np.float32, arrays, (6, 2), np.float32, "tag")] * 2


def test_non_contiguous_tensor_arguments(runtime):
    @custom.kernel
    def double(x, out):
        start, stop = span(out.shape[0])
        out[start:stop] = 2 * x[start:stop]

    x = data(20).reshape(4, 5)
    out = strided(np.zeros((4, 5), np.float32), "transpose")
    source = strided(x, "step")
    double[3, 0](source, out)
    openacl.rt.synchronize_stream(0)
    np.testing.assert_array_equal(out.numpy(), 2 * x)


def test_launch_is_asynchronous(threaded_runtime, gate):
    ran = threading.Event()

    @custom.kernel
    def mark(z, n):
        start, stop = span(n)
        global_buffer(z, np.int32, n)[start:stop] = 7
        ran.set()

    stream = openacl.Stream()
    z = openacl.rt.malloc(64 * 4)
    global_buffer(z, np.int32, 64)[:] = 0
    stream.launch_host_func(gate.task)
    mark[4, stream](z, 64)  # returns at once although the stream is held
    assert gate.entered.wait(GATE_WAIT_S)
    assert not ran.wait(SETTLE_S)
    assert not stream.done()
    assert not global_buffer(z, np.int32, 64).any()
    gate.open()
    stream.synchronize()
    assert ran.is_set()
    assert (global_buffer(z, np.int32, 64) == 7).all()


@pytest.mark.parametrize(("n", "block_dim"), [(1000, 7), (1000, 1), (5, 16), (1, 4),
                                              (4096, 32)])
def test_every_element_written_exactly_once(runtime, n, block_dim):
    hits, lock, blocks = np.zeros(n, np.int64), threading.Lock(), []

    @custom.kernel
    def cover(x, z, count):
        start, stop = span(count)
        xs, zs = global_buffer(x, np.float32, count), global_buffer(z, np.float32, count)
        zs[start:stop] = xs[start:stop] + 1
        with lock:
            hits[start:stop] += 1
            blocks.append((get_block_idx(), get_block_num()))

    x = openacl.to_device(data(n, n))
    z = openacl.empty((n,), np.float32)
    cover[block_dim, 0](x.data_ptr, z.data_ptr, n)
    openacl.rt.synchronize_stream(0)
    np.testing.assert_array_equal(hits, np.ones(n))
    np.testing.assert_array_equal(z.numpy(), data(n, n) + 1)
    assert sorted(blocks) == [(i, block_dim) for i in range(block_dim)]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs at least two CPU cores")
def test_blocks_run_on_distinct_threads(threaded_runtime):
    block_dim = min(4, os.cpu_count())
    barrier = threading.Barrier(block_dim, timeout=GATE_WAIT_S)
    idents, lock = set(), threading.Lock()

    @custom.kernel
    def meet():
        barrier.wait()
        with lock:
            idents.add(threading.get_ident())

    meet[block_dim, 0]()
    openacl.rt.synchronize_stream(0)
    assert len(idents) == block_dim and threading.get_ident() not in idents


def test_global_buffer_is_bounds_checked(runtime):
    @custom.kernel
    def read_past(ptr, n, offset):
        global_buffer(ptr, np.float32, n, offset).sum()

    ptr = openacl.rt.malloc(100 * 4)
    cases = [(101, 0), (100, 1), (1 << 40, 0), (1, 100)]
    for n, offset in cases:
        stream = openacl.Stream()
        with check_error(ACL_ERROR_RT_AICORE_EXCEPTION, "read_past", "block 0/2", "ptr"):
            read_past[2, stream](ptr, n, offset)
            stream.synchronize()
    stream = openacl.Stream()
    read_past[2, stream](ptr, 100, 0)  # exactly the allocation is fine
    read_past[2, stream](ptr, 0, 100)
    stream.synchronize()
    openacl.rt.free(ptr)
    stream = openacl.Stream()
    with check_error(ACL_ERROR_RT_AICORE_EXCEPTION, "read_past"):  # use after free
        read_past[1, stream](ptr, 1, 0)
        stream.synchronize()


def test_global_buffer_wild_pointer(runtime):
    @custom.kernel
    def wild(ptr):
        global_buffer(ptr, np.uint8, 16)[:] = 1

    stream = openacl.Stream()
    with check_error(ACL_ERROR_RT_AICORE_EXCEPTION, "wild"):
        wild[1, stream](0x10)
        stream.synchronize()
    with check_error(ACL_ERROR_INVALID_PARAM):
        global_buffer(0x10, np.float32, -1)


@pytest.mark.parametrize("block_dim", [0, -1, "x", 2.0, None, True])
def test_bad_block_dim(block_dim):
    with check_error(ACL_ERROR_INVALID_PARAM, "blockDim"):
        add_kernel[block_dim, 0]
    with check_error(ACL_ERROR_INVALID_PARAM, "blockDim"):
        add_kernel[block_dim, None, 0]


@pytest.mark.parametrize("launch", [1, (1,), (1, None, 0, 0), ()])
def test_wrong_launch_tuple(launch):
    with check_error(ACL_ERROR_INVALID_PARAM, "add_kernel", "[block_dim, stream]"):
        add_kernel[launch]


def test_calling_a_kernel_directly(threaded_runtime):
    with check_error(ACL_ERROR_INVALID_PARAM, "add_kernel[block_dim, stream]"):
        add_kernel(0, 0, 0, 0)
    with check_error(ACL_ERROR_INVALID_PARAM):
        custom.kernel(42)
    assert add_kernel.__name__ == "add_kernel" and "float32" in add_kernel.__doc__


def test_numpy_array_argument(threaded_runtime):
    ran = []

    @custom.kernel
    def take(a):
        ran.append(a)

    for host in (np.zeros(4, np.float32), np.zeros((2, 2), np.int64)):
        with check_error(ACL_ERROR_INVALID_PARAM, "args[0]", "numpy"):
            take[1, 0](host)
    openacl.rt.synchronize_stream(0)
    assert ran == []


def test_zero_dim_numpy_array_is_not_a_pointer(threaded_runtime):
    """BUG: a 0-d integer ndarray has __index__, so _convert (kernel_launch.py) takes it for
    a device pointer before its ndarray check and passes an int to the kernel."""
    @custom.kernel
    def take(a):
        pass

    with check_error(ACL_ERROR_INVALID_PARAM, "args[0]"):
        take[1, 0](np.array(5, np.int64))


def test_failing_block_fails_the_stream(runtime):
    @custom.kernel
    def explode(n):
        if get_block_idx() in (1, 3):
            raise ValueError(f"boom in {get_block_idx()}")

    stream, other = openacl.Stream(), openacl.Stream()
    with check_error(ACL_ERROR_RT_AICORE_EXCEPTION, "explode", "block 1/4", "ValueError",
                     "boom in 1", "1 more block(s) failed"):
        explode[4, stream](1)
        stream.synchronize()
    # another stream is unaffected
    x = openacl.to_device(data(10))
    z = openacl.empty((10,), np.float32)
    add_kernel[2, other](x.data_ptr, x.data_ptr, z.data_ptr, 10)
    other.synchronize()
    np.testing.assert_array_equal(z.numpy(stream=other), 2 * data(10))


KERNEL_SOURCE = """\
from openacl import custom
from openacl.custom import get_block_idx, global_buffer
import numpy as np


def helper(n):
    if get_block_idx() == 3:
        raise ValueError(f"bad tile {get_block_idx()} of {n}")  # RAISE


@custom.kernel
def tiled(n):
    helper(n)  # CALL


@custom.kernel
def reads_past(ptr, n):
    global_buffer(ptr, np.float32, n).sum()  # READ
"""


def _line(marker: str) -> int:
    """The 1-based line of KERNEL_SOURCE that carries ``# marker``."""
    return next(number for number, text in enumerate(KERNEL_SOURCE.splitlines(), 1)
                if text.endswith(f"# {marker}"))


def _kernel_module(tmp_path):
    import importlib.util

    path = tmp_path / "my_kernels.py"
    path.write_text(KERNEL_SOURCE)
    spec = importlib.util.spec_from_file_location("my_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def test_failing_block_shows_the_kernels_traceback(runtime, tmp_path):
    path, module = _kernel_module(tmp_path)
    stream = openacl.Stream()
    with check_error(ACL_ERROR_RT_AICORE_EXCEPTION, "kernel tiled block 3/5 failed",
                     "ValueError: bad tile 3 of 7", "traceback of block 3") as info:
        module.tiled[5, stream](7)
        stream.synchronize()
    message = str(info.value)
    call, raise_ = f'File "{path}", line {_line("CALL")}, in tiled', \
        f'File "{path}", line {_line("RAISE")}, in helper'
    assert call in message and raise_ in message
    assert 'raise ValueError(f"bad tile {get_block_idx()} of {n}")' in message  # the source
    assert message.index(call) < message.index(raise_)  # most recent call last
    assert "blocks.py" not in message and "kernel_launch.py" not in message
    assert "concurrent" not in message  # the worker thread's frames are trimmed too


def test_failing_openacl_call_in_a_kernel_shows_the_kernel_line(runtime, tmp_path):
    path, module = _kernel_module(tmp_path)
    ptr = openacl.rt.malloc(16 * 4)
    stream = openacl.Stream()
    with check_error(ACL_ERROR_RT_AICORE_EXCEPTION, "reads_past", "block 0/2",
                     f'File "{path}", line {_line("READ")}, in reads_past') as info:
        module.reads_past[2, stream](ptr, 17)  # one element past the allocation
        stream.synchronize()
    assert "kernel_launch.py" not in str(info.value)  # global_buffer's own frames: trimmed
    openacl.rt.free(ptr)


def test_later_tasks_on_a_failed_stream_are_skipped(threaded_runtime, gate):
    ran = []

    @custom.kernel
    def explode():
        raise RuntimeError("first")

    @custom.kernel
    def later():
        ran.append(get_block_idx())

    stream = openacl.Stream()
    stream.launch_host_func(gate.task)
    explode[2, stream]()
    later[2, stream]()
    gate.open()
    with check_error(ACL_ERROR_RT_AICORE_EXCEPTION, "explode", "first"):
        stream.synchronize()
    assert ran == []


def test_nested_launch_from_a_block_restores_the_block_context(threaded_runtime):
    """BUG: _run_block (blocks.py) resets block_idx/block_num to 0/1 when a nested launch
    (run inline, see run_blocks) ends, instead of restoring the outer block's values."""
    hits, lock, after = np.zeros(12, np.int64), threading.Lock(), set()

    def inner(offset):
        with lock:
            hits[offset + get_block_idx()] += 1

    @custom.kernel
    def outer():
        custom.blocks.run_blocks(inner, 3, (3 * get_block_idx(),), "inner")
        with lock:
            after.add((get_block_idx(), get_block_num()))

    outer[4, 0]()
    openacl.rt.synchronize_stream(0)
    np.testing.assert_array_equal(hits, np.ones(12))
    assert after == {(i, 4) for i in range(4)}

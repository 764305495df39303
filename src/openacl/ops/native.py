"""The optional C kernels (``openacl._native``): whether they are used, and for what.

Mechanism lives in ``_native.c`` (float32 loops over C-contiguous buffers); the policy is
here: the extension is imported once, on first use, and used only where its results match
the numpy kernels' (float32 host arrays; the callers check layout and aliasing). Set
``OPENACL_NATIVE=0`` to run the numpy kernels only; ``disabled()`` does the same for a block
(tests compare both paths). Where the extension was not built (no C compiler at install
time) everything runs on numpy, only slower.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

_lock = threading.Lock()
_module: ModuleType | None = None
_resolved = False
_disabled_depth = 0  # > 0 inside disabled()


def _load() -> ModuleType | None:
    from openacl.runtime import threads  # (it looks the extension up for its pool too)

    lib = threads.native_module()
    if lib is not None:
        threads.size_native_pool(lib)  # its pool starts at the setting (runs keep it there)
    return lib


def kernels() -> ModuleType | None:
    """The extension module, or None when it is missing, turned off, or ``disabled()``."""
    global _module, _resolved
    if not _resolved:
        with _lock:
            if not _resolved:
                _module = _load()
                _resolved = True
    return None if _disabled_depth else _module


def built() -> bool:
    """Whether the extension can be imported (whatever OPENACL_NATIVE says)."""
    try:
        from openacl import _native  # noqa: F401
    except ImportError:
        return False
    return True


def describe() -> str:
    """One line for ``openacl info``: which float32 kernels the CPU backend runs."""
    if not built():
        return "numpy (the C extension openacl._native was not built: no C compiler?)"
    if kernels() is None:
        return "numpy (the C extension is built but turned off: OPENACL_NATIVE=0)"
    isa = kernels().gemm_info()["isa"]
    return ("native C (openacl._native: float16 conversions, GELU, Hardswish, Sigmoid, "
            "SiLU, LeakyRelu, Softmax, ScaledMaskedSoftmax, LayerNorm, AddLayerNorm, row "
            "sums, direct and thin convolutions, tiled ConvTranspose, the LSTM "
            "recurrences, tree-ensemble walks; the float32 products and dense convolutions "
            f"(implicit im2col) on a packed GEMM ({isa} kernel), all on its own thread pool)")


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run the numpy kernels inside the block (process-wide; meant for tests)."""
    global _disabled_depth
    with _lock:
        _disabled_depth += 1
    try:
        yield
    finally:
        with _lock:
            _disabled_depth -= 1


HALF = np.dtype(np.float16)
SINGLE = np.dtype(np.float32)


def widened(array: np.ndarray) -> np.ndarray | None:
    """A float32 copy of a C-contiguous float16 host array by the CPU's F16C conversion
    (numpy's own loop is ~10x slower), or None where the C kernels cannot do it."""
    lib = kernels()
    if lib is None or type(array) is not np.ndarray or array.dtype != HALF or \
            not array.flags.c_contiguous:
        return None
    out = np.empty(array.shape, SINGLE)
    return out if lib.convert_half(array, out, True) else None


def cast(array: Any, dtype: np.dtype) -> Any:
    """``array.astype(dtype, copy=False)``, float16 -> float32 by F16C where it can
    (``widened``): the one place kernels widen half-precision operands."""
    if array.dtype == HALF and dtype == SINGLE:
        fast = widened(array)
        if fast is not None:
            return fast
    return array.astype(dtype, copy=False)


def narrowed_into(target: np.ndarray, value: np.ndarray) -> bool:
    """``target[...] = value`` for a C-contiguous float16 host ``target`` and a float32
    ``value`` of its shape, rounded to nearest even by F16C; False: not done."""
    lib = kernels()
    if lib is None or type(target) is not np.ndarray or type(value) is not np.ndarray or \
            target.dtype != HALF or value.dtype != SINGLE or target.shape != value.shape or \
            not (target.flags.c_contiguous and value.flags.c_contiguous):
        return False
    return bool(lib.convert_half(target, value, False))


def host_float32(*arrays) -> bool:
    """Every array is a C-contiguous float32 numpy array (what the C kernels take)."""
    return all(type(a) is np.ndarray and a.dtype == np.float32 and a.flags.c_contiguous
               for a in arrays)


def apart_or_same(out: np.ndarray, source: np.ndarray) -> bool:
    """``out`` shares no memory with ``source``, or is the very same elements (an in-place
    call): the two layouts the row kernels accept."""
    if not np.may_share_memory(out, source):
        return True
    return (out.__array_interface__["data"][0] == source.__array_interface__["data"][0]
            and out.nbytes == source.nbytes)


# -- the packed GEMM (_native_gemm.c) -------------------------------------------------------
LEFT, RIGHT = 0, 1  # the operand a matrix is packed as: A of A @ B, or B
_RELU, _BIAS_ROWS, _ACCUMULATE = 1, 16, 32  # _native_gemm.h's flags
# the activations conv2d_gemm and conv2d_direct apply to their outputs (_native_gemm.h's
# codes): the elementwise operators' own loops, so a fused one gives the operator's bits
ACTIVATIONS = {"relu": 1, "hardswish": 2, "sigmoid": 3, "silu": 4, "leaky_relu": 5,
               "gelu_erf": 6}


def activation_code(name: str | None) -> int:
    """The C kernels' code of the activation ``name`` of ``ACTIVATIONS`` (None: 0, none)."""
    return 0 if name is None else ACTIVATIONS[name]


@dataclass(frozen=True, eq=False)
class PackedMatrix:
    """A float32 matrix packed once into the GEMM microkernel's layout (a model's weight),
    valid for the kernel that packed it (``nr``, ``kc``; ``gemm`` refuses it after a
    change)."""

    data: np.ndarray
    rows: int
    cols: int
    side: int
    nr: int
    kc: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows, self.cols

    def usable(self) -> bool:
        """Packed for the kernel in use."""
        return (self.nr, self.kc) == _kernel_layout()


_layout: tuple[int, int] | None = None  # the kernel's (nr, kc), read once (set_isa resets)


def _kernel_layout() -> tuple[int, int]:
    global _layout
    if _layout is None:
        info = _module.gemm_info()
        _layout = info["nr"], info["kc"]
    return _layout


def set_isa(name: str) -> bool:
    """Use the GEMM's ``name`` kernel ('avx512', 'avx2', 'baseline'; for tests): False where
    the CPU lacks it. Matrices packed before are declined afterwards."""
    global _layout
    lib = kernels()
    if lib is None or not lib.gemm_set_isa(name):
        return False
    _layout = None
    return True


def isa() -> str | None:
    """The GEMM kernel in use, or None without the C kernels."""
    lib = kernels()
    return None if lib is None else lib.gemm_info()["isa"]


def _whole_steps(array: np.ndarray) -> bool:
    """Non-negative strides of whole float32 elements (what the GEMM reads)."""
    return all(step >= 0 and step % 4 == 0 for step in array.strides)


def _matrix(array: Any) -> bool:
    """A float32 host matrix the GEMM can read."""
    return (type(array) is np.ndarray and array.dtype == SINGLE and array.ndim == 2
            and _whole_steps(array))


def bias_vector(bias: Any, length: int) -> np.ndarray | None:
    """A float32 host bias of ``length`` values along its last dim (shape (length,),
    (1, length), ...) as the contiguous vector ``gemm`` adds; None for any other (the caller
    adds it after the product: (M, 1), a scalar, another dtype)."""
    if type(bias) is not np.ndarray or bias.dtype != SINGLE or bias.size != length or \
            not bias.ndim or bias.shape[-1] != length:
        return None
    return np.ascontiguousarray(bias.reshape(-1))


def pack(matrix: np.ndarray, side: int) -> PackedMatrix | None:
    """``matrix`` (2-D float32) packed as the ``side`` operand (LEFT or RIGHT), or None where
    the C kernels cannot take it."""
    lib = kernels()
    if lib is None or not _matrix(matrix):
        return None
    data = np.empty(lib.gemm_packed_size(*matrix.shape, side), SINGLE)
    lib.gemm_pack(matrix, side, data)
    return PackedMatrix(data, *matrix.shape, side, *_kernel_layout())


def _operand(value: Any, side: int) -> Any:
    """What gemm passes for one operand, or None where it cannot take it."""
    if isinstance(value, PackedMatrix):
        if value.side != side or not value.usable():
            return None
        return value.data, value.rows, value.cols, value.side, value.nr, value.kc
    return value if _matrix(value) else None


def gemm(a: np.ndarray | PackedMatrix, b: np.ndarray | PackedMatrix, out: np.ndarray, *,
         bias: np.ndarray | None = None, bias_rows: bool = False, relu: bool = False,
         accumulate: bool = False) -> bool:
    """``out = a @ b`` (``accumulate``: ``out += a @ b``), then ``+ bias`` (one value per
    column, or per row with ``bias_rows``), then ReLU, in one pass over each tile, on the C
    kernels' thread pool. ``a`` and ``b`` are float32 matrices or ``pack``'s results; the
    float32 ``out`` has contiguous rows and shares no memory with the operands or the bias.
    True when done; False, with nothing written, where the C kernels cannot take it."""
    call = gemm_call(a, b, out, bias=bias, bias_rows=bias_rows, relu=relu,
                     accumulate=accumulate)
    if call is None:
        return False
    call()
    return True


def gemm_call(a: np.ndarray | PackedMatrix, b: np.ndarray | PackedMatrix, out: np.ndarray, *,
              bias: np.ndarray | None = None, bias_rows: bool = False, relu: bool = False,
              accumulate: bool = False) -> Callable[[], None] | None:
    """``gemm``'s checks made now: the C call on these arrays, to be made as often as a
    kernel's plan (``Views.plan``) wants; None where the C kernels cannot take them. (A
    ``set_isa`` after this makes a packed operand's call raise ValueError: the C checks
    the layout at every call.)"""
    lib = kernels()
    if lib is None:
        return None
    left, right = _operand(a, LEFT), _operand(b, RIGHT)
    if left is None or right is None or not _matrix(out):
        return None
    rows, cols = out.shape
    if (a.shape[0], b.shape[1], a.shape[1]) != (rows, cols, b.shape[0]):
        return None
    if out.size and ((cols > 1 and out.strides[1] != 4) or
                     (rows > 1 and out.strides[0] < 4 * cols)):
        return None
    if bias is not None and (type(bias) is not np.ndarray or bias.dtype != SINGLE or
                             not bias.flags.c_contiguous or
                             bias.size != (rows if bias_rows else cols)):
        return None
    if any(type(x) is np.ndarray and np.may_share_memory(out, x) for x in (a, b, bias)):
        return None
    flags = (_RELU if relu else 0) | (_BIAS_ROWS if bias_rows else 0) | \
        (_ACCUMULATE if accumulate else 0)
    return functools.partial(lib.gemm, left, right, out, bias, flags)


def conv2d(x: np.ndarray, weight: np.ndarray | PackedMatrix, bias: np.ndarray | None,
           out: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
           pad: tuple[int, int], dilation: tuple[int, int], *, relu: bool = False,
           activation: str | None = None, alpha: float = 0.0) -> bool:
    """``out`` (N, C_out, OH, OW) = the 2-d convolution (one group) of ``x`` (N, C, H, W)
    with ``weight`` (C_out x C*KH*KW: a matrix, or ``pack(..., LEFT)``'s result), ``pad``
    the (top, left) padding (what comes after is implied by the output size), plus ``bias``
    per output channel, then ReLU (or ``activation``, see ``conv2d_call``): the packed GEMM
    with each image's im2col matrix packed block by block, never stored. True when done;
    False, with nothing written, where the C kernels cannot take it (dtypes, layouts,
    overlap)."""
    call = conv2d_call(x, weight, bias, out, kernel, stride, pad, dilation, relu=relu,
                       activation=activation, alpha=alpha)
    if call is None:
        return False
    call()
    return True


def conv2d_call(x: np.ndarray, weight: np.ndarray | PackedMatrix, bias: np.ndarray | None,
                out: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
                pad: tuple[int, int], dilation: tuple[int, int], *, relu: bool = False,
                activation: str | None = None, alpha: float = 0.0
                ) -> Callable[[], None] | None:
    """``conv2d``'s checks made now (as ``gemm_call``): the C call on these arrays, or None
    where the C kernels cannot take them. ``activation`` (a name of ``ACTIVATIONS``, with
    its parameter ``alpha``) is applied in the tiles; ``relu`` is ``activation="relu"``."""
    lib = kernels()
    left = _operand(weight, LEFT)
    if lib is None or left is None or not host_float32(x, out) or x.ndim != 4 or \
            out.ndim != 4 or out.shape[:2] != (x.shape[0], weight.shape[0]) or \
            weight.shape[1] != x.shape[1] * kernel[0] * kernel[1]:
        return None
    if bias is not None and not (host_float32(bias) and bias.size == out.shape[1]):
        return None
    if any(type(a) is np.ndarray and np.may_share_memory(out, a) for a in (x, weight, bias)):
        return None
    code = activation_code("relu" if relu else activation)
    return functools.partial(lib.conv2d_gemm, x, left, bias, out, x.shape, kernel, stride,
                             pad, dilation, out.shape[2:], code, alpha)


# Below this many multiply-adds numpy's matmul (its BLAS on one thread) is as fast: the
# checks here and a pool round trip (a sleeping worker's wake-up: 40-60 us on a VM) cost
# more than a second thread saves (measured, 88 x 16 @ 16 x 288: 32 us against ~10).
SMALL_PRODUCT = 1 << 20
# With fewer rows than FEW_ROWS, a raw right operand's packing costs more than the product
# it serves (a row vector times a matrix: numpy's BLAS runs a matrix-vector product); with
# fewer columns than FEW_COLUMNS most of each microkernel tile's lanes would be padding
# (measured, 258 x 256 @ 256 x 4: 114 us against numpy's 15).
FEW_ROWS = 8
FEW_COLUMNS = 16


def suits(rows: int, cols: int, depth: int) -> bool:
    """Whether (rows x depth) @ (depth x cols) products (``depth`` counting every product
    of a batch) go to the packed GEMM: see SMALL_PRODUCT, FEW_ROWS and FEW_COLUMNS."""
    return rows >= FEW_ROWS and cols >= FEW_COLUMNS and rows * cols * depth >= SMALL_PRODUCT


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """``np.matmul(a, b, out=out)`` for float32 host arrays of 2 or more dims by the packed
    GEMM, the whole (broadcast) batch in one call; False, with nothing written, where the C
    kernels cannot take it, or the product is small (``SMALL_PRODUCT``) or thin
    (``FEW_ROWS``, ``FEW_COLUMNS``): numpy's matmul is then the caller's."""
    shape = out.shape  # the cheap refusals first: most declined products are small
    if len(shape) < 2 or a.ndim < 2 or b.ndim < 2:
        return False
    batch = out.size // max(1, shape[-2] * shape[-1])
    if not suits(shape[-2], shape[-1], batch * a.shape[-1]):
        return False
    lib = kernels()
    if lib is None or type(a) is not np.ndarray or type(b) is not np.ndarray or \
            a.ndim < 2 or b.ndim < 2 or a.dtype != SINGLE or b.dtype != SINGLE or \
            not _matrix_rows(out) or out.ndim != max(a.ndim, b.ndim):
        return False
    if a.ndim == b.ndim == 2:
        return gemm(a, b, out)
    batch = out.shape[:-2]
    if a.shape[-2:] != (out.shape[-2], b.shape[-2]) or b.shape[-1] != out.shape[-1]:
        return False
    if np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return False
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2], batch)
    except ValueError:
        return False
    return _batched(lib, a, b, out)


def _batched(lib: ModuleType, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """One gemm call over out's batch where every operand's batch collapses into one stride,
    else one per index of the first batch dim (operands already checked)."""
    batch = out.shape[:-2]
    count = math.prod(batch)
    try:
        stacked_out = out.reshape(count, *out.shape[-2:], copy=False)
        left, right = _stack(a, batch, count), _stack(b, batch, count)
    except ValueError:  # batch dims that do not collapse into one stride
        left = right = stacked_out = None
    if left is not None and right is not None and stacked_out is not None:
        lib.gemm(left, right, stacked_out, None, 0)
        return True
    if len(batch) == 1:
        return False
    for index in range(batch[0]):
        if not _batched(lib, _item(a, index, out.ndim), _item(b, index, out.ndim),
                        out[index]):
            return False  # (only at the first index: every index has the same layout)
    return True


def _item(operand: np.ndarray, index: int, ndim: int) -> np.ndarray:
    """The part of a broadcast ``operand`` that product ``index`` of the first of ``ndim``
    dims reads."""
    if operand.ndim < ndim:
        return operand
    return operand[0 if operand.shape[0] == 1 else index]


def _stack(operand: np.ndarray, batch: tuple[int, ...], count: int) -> np.ndarray | None:
    """``operand`` broadcast over ``batch`` as one (count, rows, cols) view, or a matrix when
    every product shares it; None where its strides cannot be expressed so."""
    if operand.ndim == 2 or all(size == 1 for size in operand.shape[:-2]):
        matrix = operand.reshape(operand.shape[-2:])
        return matrix if _matrix(matrix) else None
    stacked = np.broadcast_to(operand, (*batch, *operand.shape[-2:])).reshape(
        count, *operand.shape[-2:], copy=False)
    return stacked if _whole_steps(stacked) else None


# A weight packed once needs no packing per call, so the packed GEMM pays off on much smaller
# and flatter products than SMALL_PRODUCT / FEW_ROWS allow; with its kernels for tiles of
# fewer than 6 rows, down to one row (measured as planned calls, numpy's BLAS against
# packed: 1 x 128 @ 128 x 128 2.2 us against 1.4; 1 x 1536 @ 1536 x 128 15 against 7 on two
# threads; 2 x 256 @ 256 x 768 70 against 10).
PACKED_MIN_PRODUCT = 1 << 13
PACKED_MIN_ROWS = 1


def rows_times_packed(a: Any, weight: Callable[[], PackedMatrix | bool | None],
                      out: Any) -> bool:
    """``out = a @ W`` for a float32 host ``a`` (..., K) with contiguous rows and ``out``
    (..., N) C-contiguous, the leading dims taken as rows, where ``weight()`` gives W
    (K x N) packed as RIGHT (called only once the shapes qualify, so a weight that never
    meets enough rows is never packed); False, with nothing written, where it does not
    apply or is too small."""
    call = rows_times_packed_call(a, weight, out)
    if call is None:
        return False
    call()
    return True


def rows_times_packed_call(a: Any, weight: Callable[[], PackedMatrix | bool | None],
                           out: Any, bias: np.ndarray | None = None, relu: bool = False
                           ) -> Callable[[], None] | None:
    """``rows_times_packed``'s checks made now (as ``gemm_call``): the C call, with ``+
    bias`` (one value per column) and then ReLU fused where asked; None where it does not
    apply."""
    if type(a) is not np.ndarray or type(out) is not np.ndarray or a.ndim < 2 or \
            out.ndim != a.ndim or a.dtype != SINGLE or out.dtype != SINGLE or \
            out.shape[:-1] != a.shape[:-1]:
        return None
    depth, cols = a.shape[-1], out.shape[-1]
    rows = out.size // max(1, cols)
    if rows < PACKED_MIN_ROWS or cols < FEW_COLUMNS or \
            rows * cols * depth < PACKED_MIN_PRODUCT or \
            not (a.flags.c_contiguous and out.flags.c_contiguous):
        return None
    packed = weight()
    if not packed or packed.shape != (depth, cols):
        return None
    return gemm_call(a.reshape(rows, depth), packed, out.reshape(rows, cols), bias=bias,
                     relu=relu)


def packed_product(a: Any, packed: PackedMatrix | None, b: Any) -> Any:
    """``a @ b`` where ``packed`` is ``pack(b, RIGHT)`` (a model's weight, packed once; None
    where it could not be): by the GEMM when it takes ``a``, else by ``product``."""
    if packed is not None and type(a) is np.ndarray and a.ndim == 2:
        out = np.empty((a.shape[0], packed.cols), SINGLE)
        if rows_times_packed(a, lambda: packed, out):  # (its rule for packed weights)
            return out
    return product(a, b)


def product(a: Any, b: Any) -> Any:
    """``a @ b``; float32 host matrices (and batches) by the packed GEMM, the rest by numpy."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype == SINGLE \
            and a.ndim >= 2 and b.ndim >= 2 and kernels() is not None:
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            return a @ b  # (numpy's error)
        out = np.empty((*batch, a.shape[-2], b.shape[-1]), SINGLE)
        if a.shape[-1] == b.shape[-2] and matmul(a, b, out):
            return out
    return a @ b


def _matrix_rows(out: Any) -> bool:
    """A float32 host array whose last axis is contiguous (what gemm writes)."""
    return (type(out) is np.ndarray and out.dtype == SINGLE and out.ndim >= 2 and
            (out.strides[-1] == 4 or out.shape[-1] <= 1 or out.size == 0) and
            all(step >= 0 for step in out.strides))

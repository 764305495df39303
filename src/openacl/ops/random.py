"""Random operators (CANN's random/ family): Bernoulli, Dropout and its bit masks, the
in-place Normal / Uniform / Random fills, Multinomial and Randperm.

Reproducibility: every value comes from a counter-based generator, Philox4x32-10 (the one
CANN's and PyTorch's device kernels use), keyed by ``seed`` and positioned by ``offset``:
the stream of 32-bit words is the Philox blocks of counters ``0, 1, 2, ...`` flattened, and
a call reads it from word ``offset`` on. The same (seed, offset) gives the same values on
every backend, run after run; a caller that advances ``offset`` by what a call consumed
(``words_used``: one word per element, two for a normal or float64 value) gets fresh ones.
The bits are not the NPU's (its kernels' word-to-value mappings are not documented), so a
program reproduces its own runs here, not an NPU's.

CANN's ``from`` arguments are ``from_`` here (``from`` is a Python keyword; torch's name).
The ``*Tensor`` forms read seed and offset from one-element int64 device tensors at run
time (``offsetTensor[0] + offset``), as a graph that keeps its generator state on the
device does.

Dropout masks are bits in uint8 bytes, element ``i`` at bit ``i % 8`` of byte ``i // 8``
(least significant first, as the NPU's mask registers unpack), a set bit keeps the element;
the mask holds ``align(numel, 128) / 8`` bytes (CANN's size rule), the bits past ``numel``
clear.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from openacl.errors import AclError
from openacl.ops.call import (
    ACLNN_ERR_PARAM_NULLPTR,
    BOOL_DTYPES,
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    Call,
    Kernel,
    array_module,
)
from openacl.ops.registry import register, register_inplace

__all__ = ["philox4x32", "philox_words", "words_used", "uniform01", "mask_bytes",
           "MASK_ALIGN_BITS"]

# Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011)
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85  # key increments (Weyl sequence)
PHILOX_ROUNDS = 10
WORDS_PER_BLOCK = 4  # 32-bit words per Philox block
WORD_BITS = 32
LOW32 = np.uint64(0xFFFFFFFF)
FLOAT24 = 2.0 ** -24  # one word -> a float in [0, 1) with a float32 mantissa
FLOAT32_WORD = 2.0 ** -32  # one word -> a double in [0, 1) (Bernoulli's comparison)
MASK_ALIGN_BITS = 128  # dropout masks cover the elements rounded up to this many bits
BITS_PER_BYTE = 8

FILL_DTYPES = FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES  # InplaceNormal's and Bernoulli's
RANDOM_DTYPES = FILL_DTYPES | COMPLEX_DTYPES  # InplaceRandom's
UNIFORM_DTYPES = FLOAT_DTYPES | INT_DTYPES  # InplaceUniform's
DROPOUT_DTYPES = frozenset(d for d in FLOAT_DTYPES if d != np.float64)
PROB_DTYPES = FLOAT_DTYPES  # Bernoulli's prob scalar / tensor
MULTINOMIAL_DTYPES = FLOAT_DTYPES
MULTINOMIAL_MAX_CATEGORIES = 1 << 24  # CANN: the last dim of self at most 2^24
PERMUTATION_DTYPES = FLOAT_DTYPES | frozenset(d for d in INT_DTYPES)
INT64 = np.dtype(np.int64)
UINT8 = np.dtype(np.uint8)


# -- the generator ----------------------------------------------------------------------
def philox4x32(counter: tuple[np.ndarray, ...], key: tuple[int, int]) -> np.ndarray:
    """Philox4x32-10 of the counters ``(c0, c1, c2, c3)`` (uint64 arrays holding 32-bit
    values) under ``key`` (k0, k1): a ``(n, 4)`` uint32 array of the output blocks."""
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) for c in counter)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    for round_index in range(PHILOX_ROUNDS):
        product0, product1 = m0 * c0, m1 * c2  # exact: both factors < 2^32
        hi0, lo0 = product0 >> np.uint64(WORD_BITS), product0 & LOW32
        hi1, lo1 = product1 >> np.uint64(WORD_BITS), product1 & LOW32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        if round_index + 1 < PHILOX_ROUNDS:
            k0 = (k0 + np.uint64(PHILOX_W0)) & LOW32
            k1 = (k1 + np.uint64(PHILOX_W1)) & LOW32
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def _philox_blocks(seed: int, first: int, count: int) -> np.ndarray:
    """``count`` blocks for counters ``first ... first + count - 1`` (c0, c1 = the counter's
    low and high words, c2 = c3 = 0) under key ``seed`` (64 bits)."""
    counter = np.arange(first, first + count, dtype=np.uint64)
    zeros = np.zeros_like(counter)
    return philox4x32((counter & LOW32, counter >> np.uint64(WORD_BITS), zeros, zeros),
                      (seed & 0xFFFFFFFF, (seed >> WORD_BITS) & 0xFFFFFFFF))


def philox_words(seed: int, offset: int, count: int) -> np.ndarray:
    """Words ``offset ... offset + count - 1`` of the stream keyed by ``seed`` (the module
    docstring), as uint32."""
    seed, offset = int(seed) & ((1 << 64) - 1), int(offset)
    if offset < 0:
        raise ValueError(f"offset {offset} is negative")
    first, skip = divmod(offset, WORDS_PER_BLOCK)
    blocks = -(-(skip + count) // WORDS_PER_BLOCK)
    return _philox_blocks(seed, first, blocks).reshape(-1)[skip:skip + count]


def words_used(numel: int, dtype: np.dtype, normal: bool = False) -> int:
    """Stream words a fill of ``numel`` elements of ``dtype`` consumes."""
    per = 2 if normal or np.dtype(dtype) in (np.float64, np.complex128) else 1
    return numel * per


def uniform01(words: np.ndarray) -> np.ndarray:
    """Floats in [0, 1) (float64 holding 24-bit values: exact in every float dtype) from
    one word each."""
    return (words >> np.uint32(8)).astype(np.float64) * FLOAT24


def _uniform53(words: np.ndarray) -> np.ndarray:
    """float64 values in [0, 1) with 53 random bits, from two words each."""
    high = (words[0::2] >> np.uint32(5)).astype(np.float64)
    low = (words[1::2] >> np.uint32(6)).astype(np.float64)
    return (high * 67108864.0 + low) * 2.0 ** -53


def _normals(seed: int, offset: int, numel: int) -> np.ndarray:
    """Standard normal float64 values (Box-Muller over word pairs), two words each."""
    words = philox_words(seed, offset, 2 * numel).reshape(numel, 2)
    u1 = 1.0 - uniform01(words[:, 0])  # (0, 1]: log never sees 0
    u2 = uniform01(words[:, 1])
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)


def _uniforms(seed: int, offset: int, numel: int, dtype: np.dtype) -> np.ndarray:
    if np.dtype(dtype) in (np.float64, np.complex128):
        return _uniform53(philox_words(seed, offset, 2 * numel))
    return uniform01(philox_words(seed, offset, numel))


def _host(view: object) -> np.ndarray:
    """A kernel's input view as a host array (a device view copied: seeds, masks, weights
    are read on the host)."""
    return view if isinstance(view, np.ndarray) else view.get()


# -- shared argument rules ---------------------------------------------------------------------
def _seed_offset(c: Call) -> None:
    if c["offset"] < 0:
        raise c.fail("offset", "must be >= 0")


def _tensor_seed(c: Call) -> None:
    """seedTensor / offsetTensor: one-element int64 tensors (the module docstring)."""
    for name in ("seedTensor", "offsetTensor"):
        if c[name] is None:
            raise c.fail(name, "is null", ACLNN_ERR_PARAM_NULLPTR)
        c.check_dtype(name, {INT64})
        if c.tensor(name).numel != 1:
            raise c.fail(name, f"must hold one element, not {list(c.tensor(name).shape)}")


def _state(v, c_offset: int) -> tuple[int, int]:
    """(seed, offset) of a ``*Tensor`` form, read from its tensors at run time."""
    offset = int(_host(v["offsetTensor"]).reshape(-1)[0]) + c_offset
    if offset < 0:
        raise ValueError(f"offsetTensor[0] + offset = {offset} is negative")
    return int(_host(v["seedTensor"]).reshape(-1)[0]), offset


def _generator(c: Call, tensor_form: bool) -> Callable[[object], tuple[int, int]]:
    """A function of the kernel's views giving (seed, offset)."""
    if tensor_form:
        _tensor_seed(c)
        offset = int(c["offset"])
        return lambda v: _state(v, offset)
    _seed_offset(c)
    seed, offset = int(c["seed"]), int(c["offset"])
    return lambda v: (seed, offset)


def _as(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return values.astype(dtype) if dtype != np.bool_ else values != 0


# -- Bernoulli -------------------------------------------------------------------------------
def _check_probability(c: Call, name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise c.fail(name, "must be in [0, 1]")


def _bernoulli(c: Call, tensor_prob: bool, target: str) -> Kernel:
    """out = 1 with probability prob, else 0 (prob a scalar, or a tensor broadcast to
    self's shape); one word per element, compared as ``word / 2^32 < prob``."""
    self = c.tensor("self")
    c.check_dtype("self", FILL_DTYPES)
    _seed_offset(c)
    if tensor_prob:
        c.check_dtype("prob", PROB_DTYPES)
        if c.broadcast("self", "prob") != self.shape:
            raise c.fail("prob", f"shape {list(c.tensor('prob').shape)} does not broadcast "
                                 f"to self's {list(self.shape)}")
    else:
        if c["prob"] is None:
            raise c.fail("prob", "is null", ACLNN_ERR_PARAM_NULLPTR)
        c.check_dtype("prob", PROB_DTYPES)
        probability = float(c["prob"].value)
        _check_probability(c, "prob", probability)
    c.check_out(target, self.shape, self.dtype, exact_dtype=True)
    seed, offset, shape = int(c["seed"]), int(c["offset"]), self.shape

    def kernel(v) -> None:
        draws = philox_words(seed, offset, math.prod(shape)).astype(np.float64).reshape(shape)
        threshold = (_host(v["prob"]).astype(np.float64) if tensor_prob else probability)
        if tensor_prob and np.any((threshold < 0) | (threshold > 1)):
            raise ValueError("prob holds values outside [0, 1]")
        v.write(target, _as(draws * FLOAT32_WORD < threshold, v[target].dtype))
    return kernel


@register("Bernoulli", "self: tensor, prob: scalar, seed: int = 0, offset: int = 0, "
                       "out: tensor!")
def bernoulli(c: Call) -> Kernel:
    return _bernoulli(c, False, "out")


@register("BernoulliTensor", "self: tensor, prob: tensor, seed: int = 0, offset: int = 0, "
                             "out: tensor!")
def bernoulli_tensor(c: Call) -> Kernel:
    return _bernoulli(c, True, "out")


def _inplace_bernoulli(c: Call) -> Kernel:
    return _bernoulli(c, False, "self")


def _inplace_bernoulli_tensor(c: Call) -> Kernel:
    return _bernoulli(c, True, "self")


register_inplace("InplaceBernoulli", "selfRef: tensor!, prob: scalar, seed: int = 0, "
                 "offset: int = 0", _inplace_bernoulli, self="selfRef")
register_inplace("InplaceBernoulliTensor", "selfRef: tensor!, prob: tensor, seed: int = 0, "
                 "offset: int = 0", _inplace_bernoulli_tensor, self="selfRef")


# -- in-place fills ------------------------------------------------------------------------------
def _fill(c: Call, allowed: frozenset, tensor_form: bool,
          values: Callable[[int, int, int, np.dtype], np.ndarray]) -> Kernel:
    """selfRef = ``values(seed, offset, numel, dtype)`` reshaped and cast."""
    target = c.tensor("selfRef")
    c.check_dtype("selfRef", allowed)
    state = _generator(c, tensor_form)
    c.check_out("selfRef", target.shape, target.dtype, exact_dtype=True)
    shape, dtype = target.shape, target.dtype

    def kernel(v) -> None:
        seed, offset = state(v)
        v.write("selfRef", values(seed, offset, math.prod(shape), dtype).reshape(shape))
    return kernel


def _normal(c: Call, tensor_form: bool) -> Kernel:
    """selfRef ~ N(mean, std^2): Box-Muller over word pairs, rounded into selfRef's dtype."""
    mean, std = float(c["mean"]), float(c["std"])
    if not std >= 0:
        raise c.fail("std", "must be >= 0")

    def values(seed: int, offset: int, numel: int, dtype: np.dtype) -> np.ndarray:
        normal = mean + std * _normals(seed, offset, numel)
        return _as(np.rint(normal) if dtype.kind in "iu" else normal, dtype)
    return _fill(c, FILL_DTYPES, tensor_form, values)


def _inplace_normal(c: Call) -> Kernel:
    return _normal(c, False)


def _inplace_normal_tensor(c: Call) -> Kernel:
    return _normal(c, True)


register_inplace("InplaceNormal", "selfRef: tensor!, mean: float = 0.0, std: float = 1.0, "
                 "seed: int = 0, offset: int = 0", _inplace_normal, selfRef="selfRef")
register_inplace("InplaceNormalTensor", "selfRef: tensor!, mean: float, std: float, "
                 "seedTensor: tensor, offsetTensor: tensor, offset: int = 0",
                 _inplace_normal_tensor, selfRef="selfRef")


def _dtype_bounds(dtype: np.dtype) -> tuple[float, float]:
    if dtype == np.bool_:
        return 0, 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min, info.max
    real = np.dtype(np.float32 if dtype.kind == "c" else dtype)
    info = np.finfo(real) if real.kind == "f" else np.finfo(np.float32)
    return float(info.min), float(info.max)


def _uniform(c: Call) -> Kernel:
    """selfRef ~ U[from, to): floats keep the value (rounded into the dtype); integers take
    its floor."""
    low, high = float(c["from_"]), float(c["to"])
    if not low <= high:
        raise c.fail("from_", f"must be <= to ({high})")
    lowest, highest = _dtype_bounds(c.tensor("selfRef").dtype)
    if low < lowest or high > highest:
        raise c.fail("to", f"[{low}, {high}) leaves the range of selfRef's dtype")

    def values(seed: int, offset: int, numel: int, dtype: np.dtype) -> np.ndarray:
        drawn = low + (high - low) * _uniforms(seed, offset, numel, dtype)
        return _as(np.floor(drawn) if dtype.kind in "iu" else drawn, dtype)
    return _fill(c, UNIFORM_DTYPES, False, values)


register_inplace("InplaceUniform", "selfRef: tensor!, from_: float = 0.0, to: float = 1.0, "
                 "seed: int = 0, offset: int = 0", _uniform, selfRef="selfRef")


def _random(c: Call, tensor_form: bool) -> Kernel:
    """selfRef ~ the integers of [from, to - 1], uniformly (word % (to - from); two words
    per element when the span passes 2^32); float and complex tensors hold them as values,
    a bool tensor whether each is nonzero (any range: CANN's own cases pass bool tensors
    with ranges outside [0, 1])."""
    low, high = int(c["from_"]), int(c["to"])
    if low >= high:
        raise c.fail("from_", f"must be < to ({high})")
    dtype = c.tensor("selfRef").dtype
    lowest, highest = _dtype_bounds(dtype)
    if dtype != np.bool_ and (low < lowest or high - 1 > highest):  # bool: value != 0
        raise c.fail("to", f"[{low}, {high - 1}] leaves the range of selfRef's dtype")
    span = high - low

    def values(seed: int, offset: int, numel: int, dtype: np.dtype) -> np.ndarray:
        if span <= 1 << WORD_BITS:
            draws = philox_words(seed, offset, numel).astype(np.uint64) % np.uint64(span)
        else:
            words = philox_words(seed, offset, 2 * numel).astype(np.uint64)
            draws = ((words[0::2] << np.uint64(WORD_BITS)) | words[1::2]) % np.uint64(span)
        # modulo 2^64 (the result lies in [from, to - 1], inside int64)
        values = draws.view(np.int64) + np.int64(low)
        return _as(values.astype(np.float64) if dtype.kind in "fc" else values, dtype)
    return _fill(c, RANDOM_DTYPES, tensor_form, values)


def _inplace_random(c: Call) -> Kernel:
    return _random(c, False)


def _inplace_random_tensor(c: Call) -> Kernel:
    return _random(c, True)


register_inplace("InplaceRandom", "selfRef: tensor!, from_: int, to: int, seed: int = 0, "
                 "offset: int = 0", _inplace_random, selfRef="selfRef")
register_inplace("InplaceRandomTensor", "selfRef: tensor!, from_: int, to: int, "
                 "seedTensor: tensor, offsetTensor: tensor, offset: int = 0",
                 _inplace_random_tensor, selfRef="selfRef")


# -- dropout -------------------------------------------------------------------------------------
def mask_bytes(numel: int) -> int:
    """Bytes of a dropout mask over ``numel`` elements (CANN's size rule)."""
    return -(-numel // MASK_ALIGN_BITS) * MASK_ALIGN_BITS // BITS_PER_BYTE


def _keep_bits(seed: int, offset: int, numel: int, drop: float) -> np.ndarray:
    """The mask bytes: element i kept (bit set) when its uniform is >= drop."""
    keep = np.zeros(mask_bytes(numel) * BITS_PER_BYTE, bool)
    keep[:numel] = uniform01(philox_words(seed, offset, numel)) >= drop
    return np.packbits(keep, bitorder="little")


def _unpacked(mask: np.ndarray, numel: int) -> np.ndarray:
    return np.unpackbits(_host(mask).reshape(-1), bitorder="little")[:numel]


def _check_mask(c: Call, name: str, numel: int) -> None:
    c.check_dtype(name, {UINT8})
    if c.tensor(name).numel != mask_bytes(numel):
        raise c.fail(name, f"must hold align({numel}, {MASK_ALIGN_BITS}) / 8 = "
                           f"{mask_bytes(numel)} bytes")


def _gen_mask(c: Call, tensor_form: bool) -> Kernel:
    """The dropout mask for ``shape``'s elements: a bit set keeps an element, probability
    ``1 - prob``."""
    shape = [int(d) for d in c["shape"]]
    if any(d < 0 for d in shape):
        raise c.fail("shape", "dims must be >= 0")
    drop = float(c["prob"])
    _check_probability(c, "prob", drop)
    state = _generator(c, tensor_form)
    numel = math.prod(shape)
    c.check_out("out", (mask_bytes(numel),), UINT8, exact_dtype=True)

    def kernel(v) -> None:
        seed, offset = state(v)
        v.write("out", _keep_bits(seed, offset, numel, drop))
    return kernel


@register("DropoutGenMask", "shape: int_array, prob: float, seed: int = 0, offset: int = 0, "
                            "out: tensor!")
def dropout_gen_mask(c: Call) -> Kernel:
    return _gen_mask(c, False)


@register("DropoutGenMaskV2", "shape: int_array, prob: float, seed: int = 0, offset: int = 0, "
                              "probDataType: dtype = None, out: tensor!")
def dropout_gen_mask_v2(c: Call) -> Kernel:
    """As DropoutGenMask; ``probDataType`` (float, float16, bfloat16) names the dtype of the
    tensor the mask is for."""
    _check_prob_dtype(c)
    return _gen_mask(c, False)


@register("DropoutGenMaskV2Tensor", "shape: int_array, prob: float, seedTensor: tensor, "
                                    "offsetTensor: tensor, offset: int = 0, "
                                    "probDataType: dtype = None, out: tensor!")
def dropout_gen_mask_v2_tensor(c: Call) -> Kernel:
    _check_prob_dtype(c)
    return _gen_mask(c, True)


def _check_prob_dtype(c: Call) -> None:
    from openacl import dtypes

    data_type = c["probDataType"]
    if data_type is None:
        return
    try:
        dtype = dtypes.to_numpy_dtype(data_type)
    except AclError:
        raise c.fail("probDataType", "expected FLOAT, FLOAT16 or BFLOAT16") from None
    c.check_dtype("probDataType", DROPOUT_DTYPES, dtype=dtype)


def _masked(values: object, keep: np.ndarray, scale: float) -> object:
    """``values * scale`` where ``keep`` (host bits) is set, else 0, on values' device."""
    xp = array_module(values)
    return xp.where(xp.asarray(keep.reshape(values.shape)) != 0, values * scale, 0.0)


@register("DropoutDoMask", "self: tensor, mask: tensor, prob: float, out: tensor!")
def dropout_do_mask(c: Call) -> Kernel:
    """out = self / (1 - prob) where the mask bit is set, else 0; prob 1 zeroes all."""
    self = c.tensor("self")
    c.check_dtype("self", DROPOUT_DTYPES)
    _check_mask(c, "mask", self.numel)
    drop = float(c["prob"])
    _check_probability(c, "prob", drop)
    c.check_out("out", self.shape, self.dtype)
    numel = self.numel

    def kernel(v) -> None:
        if drop == 1.0:
            v.write("out", 0)
            return
        values = v.compute("self", self.dtype)
        v.write("out", _masked(values, _unpacked(v["mask"], numel), 1.0 / (1.0 - drop)))
    return kernel


@register("DropoutBackward", "gradOutput: tensor, mask: tensor, scale: float, out: tensor!")
def dropout_backward(c: Call) -> Kernel:
    """out = gradOutput * scale where the mask bit is set, else 0 (scale 0 or >= 1)."""
    grad = c.tensor("gradOutput")
    c.check_dtype("gradOutput", DROPOUT_DTYPES)
    _check_mask(c, "mask", grad.numel)
    scale = float(c["scale"])
    if not (scale == 0 or scale >= 1):
        raise c.fail("scale", "must be 0 or >= 1")
    c.check_out("out", grad.shape, grad.dtype)
    numel = grad.numel

    def kernel(v) -> None:
        values = v.compute("gradOutput", grad.dtype)
        v.write("out", _masked(values, _unpacked(v["mask"], numel), scale))
    return kernel


@register("Dropout", "input: tensor, p: float, train: bool, seed: int = 0, offset: int = 0, "
                     "out: tensor!, maskOut: tensor!")
def dropout(c: Call) -> Kernel:
    """out = input / (1 - p) for the kept elements, 0 for the others, and the mask in
    maskOut; with p 0, p 1 or train false, maskOut is left as it is (CANN's rule) and out
    is input (p 1: zeros)."""
    source = c.tensor("input")
    c.check_dtype("input", DROPOUT_DTYPES)
    drop = float(c["p"])
    _check_probability(c, "p", drop)
    _seed_offset(c)
    c.check_out("out", source.shape, source.dtype)
    c.check_out("maskOut", (mask_bytes(source.numel),), UINT8, exact_dtype=True)
    seed, offset, numel, train = int(c["seed"]), int(c["offset"]), source.numel, c["train"]

    def kernel(v) -> None:
        if not train or drop == 0.0:
            v.write("out", v["input"])
            return
        if drop == 1.0:
            v.write("out", 0)
            return
        bits = _keep_bits(seed, offset, numel, drop)
        v.write("maskOut", bits)
        v.write("out", _masked(v.compute("input", source.dtype), _unpacked(bits, numel),
                               1.0 / (1.0 - drop)))
    return kernel


# -- sampling --------------------------------------------------------------------------------
def _multinomial(c: Call, tensor_form: bool) -> Kernel:
    """numsamples category indices per row of self (weights >= 0): with replacement by the
    inverse of the row's cumulative weights at uniform draws; without, the numsamples
    smallest exponential keys -log(u) / weight (weighted sampling without replacement)."""
    self = c.tensor("self")
    c.check_dtype("self", MULTINOMIAL_DTYPES)
    if self.ndim not in (1, 2):
        raise c.fail("self", "must be 1-d (C) or 2-d (N, C)")
    categories = self.shape[-1]
    if categories > MULTINOMIAL_MAX_CATEGORIES:
        raise c.fail("self", f"has {categories} categories; at most "
                             f"{MULTINOMIAL_MAX_CATEGORIES}")
    samples, replacement = int(c["numsamples"]), bool(c["replacement"])
    if samples <= 0:
        raise c.fail("numsamples", "must be > 0")
    if not replacement and samples > categories:
        raise c.fail("numsamples", f"exceeds the {categories} categories of self without "
                                   f"replacement")
    state = _generator(c, tensor_form)
    c.check_out("out", (*self.shape[:-1], samples), INT64, exact_dtype=True)
    rows = math.prod(self.shape[:-1])

    def kernel(v) -> None:
        seed, offset = state(v)
        weights = _host(v["self"]).astype(np.float64).reshape(rows, categories)
        if np.any(weights < 0) or not np.all(np.isfinite(weights)):
            raise ValueError("self holds negative or non-finite weights")
        totals = weights.sum(axis=1, keepdims=True)
        if np.any(totals <= 0):
            raise ValueError("a row of self has no positive weight")
        if replacement:
            draws = uniform01(philox_words(seed, offset, rows * samples)).reshape(rows, samples)
            cumulative = np.cumsum(weights / totals, axis=1)
            picked = np.stack([np.searchsorted(cumulative[r], draws[r], side="right")
                               for r in range(rows)])
            picked = np.minimum(picked, categories - 1)
        else:
            draws = uniform01(philox_words(seed, offset, rows * categories)).reshape(
                rows, categories)
            with np.errstate(divide="ignore"):
                keys = -np.log1p(-draws) / weights  # weight 0: key inf, never picked first
            picked = np.argsort(keys, axis=1, kind="stable")[:, :samples]
        v.write("out", picked.reshape(v["out"].shape))
    return kernel


@register("Multinomial", "self: tensor, numsamples: int, replacement: bool = False, "
                         "seed: int = 0, offset: int = 0, out: tensor!")
def multinomial(c: Call) -> Kernel:
    return _multinomial(c, False)


@register("MultinomialTensor", "self: tensor, numsamples: int, replacement: bool, "
                               "seedTensor: tensor, offsetTensor: tensor, offset: int = 0, "
                               "out: tensor!")
def multinomial_tensor(c: Call) -> Kernel:
    return _multinomial(c, True)


@register("Randperm", "n: int, seed: int = 0, offset: int = 0, out: tensor!")
def randperm(c: Call) -> Kernel:
    """A random permutation of 0 ... n - 1: the order of n random words (ties by index)."""
    n = int(c["n"])
    if n < 0:
        raise c.fail("n", "must be >= 0")
    _seed_offset(c)
    if c["out"] is None and not c.infer:
        raise c.fail("out", "is null", ACLNN_ERR_PARAM_NULLPTR)
    out_dtype = c.dtype("out") if c["out"] is not None else INT64
    c.check_dtype("out", PERMUTATION_DTYPES, dtype=out_dtype)
    c.check_out("out", (n,), out_dtype, exact_dtype=True)
    seed, offset = int(c["seed"]), int(c["offset"])

    def kernel(v) -> None:
        order = np.argsort(philox_words(seed, offset, n), kind="stable")
        v.write("out", order)
    return kernel

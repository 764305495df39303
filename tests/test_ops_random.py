"""The random operators (ops/random.py): the Philox generator against Random123's known
answers, reproducibility from (seed, offset), each operator's support and moments, the
dropout mask and scaling agreeing, and the argument checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

import openacl
from op_harness import BF16
from openacl import ops
from openacl.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclError
from openacl.ops.random import mask_bytes, philox4x32, philox_words, uniform01

SIGMAS = 6.0


@pytest.fixture(autouse=True)
def _rt(threaded_runtime):
    yield


# Random123's kat_vectors for philox4x32 with 10 rounds: (counter, key, output)
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6,
                                                   0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KAT)
def test_philox_matches_the_known_answers(counter, key, expected):
    out = philox4x32(tuple(np.array([c], np.uint64) for c in counter), key)
    assert tuple(int(v) for v in out[0]) == expected


def test_the_stream_is_a_function_of_seed_and_offset():
    words = philox_words(7, 0, 100)
    np.testing.assert_array_equal(philox_words(7, 0, 100), words)
    for offset in (1, 3, 4, 37):
        np.testing.assert_array_equal(philox_words(7, offset, 100 - offset), words[offset:])
    assert not np.array_equal(philox_words(8, 0, 100), words)
    first = philox_words(0, 0, 4)
    np.testing.assert_array_equal(first, [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8])
    u = uniform01(philox_words(1, 0, 100_000))
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01


def _near(value, expected, stderr):
    assert abs(value - expected) <= SIGMAS * stderr, (value, expected, stderr)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64])
def test_inplace_normal_and_uniform_moments_and_reproducibility(dtype):
    x = openacl.to_device(np.zeros(20_000, dtype))
    ops.inplace_normal(x, 2.0, 3.0, 11, 0)
    a = x.numpy().astype(np.float64)
    _near(a.mean(), 2.0, 3.0 / math.sqrt(a.size) + 2 ** -7)
    _near(a.std(), 3.0, 3.0 / math.sqrt(2 * a.size) + 3 * 2 ** -6)
    ops.inplace_normal(x, 2.0, 3.0, 11, 0)
    np.testing.assert_array_equal(x.numpy().astype(np.float64), a)
    ops.inplace_uniform(x, -1.0, 3.0, 11, 0)
    b = x.numpy().astype(np.float64)
    assert b.min() >= -1 and b.max() <= 3
    _near(b.mean(), 1.0, 4 / math.sqrt(12 * b.size))
    x.free()


def test_tensor_forms_read_seed_and_offset_at_run_time():
    x = openacl.to_device(np.zeros(64, np.float32))
    seed, base = openacl.to_device(np.array([5], np.int64)), openacl.to_device(
        np.array([40], np.int64))
    ops.inplace_normal_tensor(x, 0.0, 1.0, seed, base, 2)
    a = x.numpy()
    ops.inplace_normal(x, 0.0, 1.0, 5, 42)
    np.testing.assert_array_equal(x.numpy(), a)
    r = openacl.to_device(np.zeros(64, np.int64))
    ops.inplace_random_tensor(r, 0, 1000, seed, base, 2)
    b = r.numpy()
    ops.inplace_random(r, 0, 1000, 5, 42)
    np.testing.assert_array_equal(r.numpy(), b)
    for tensor in (x, seed, base, r):
        tensor.free()


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float32, BF16])
def test_inplace_random_covers_its_integer_range(dtype):
    x = openacl.to_device(np.zeros(4000, dtype))
    ops.inplace_random(x, -3, 5, 2, 0)
    values = x.numpy().astype(np.float64)
    assert set(np.unique(values)) == set(range(-3, 5))
    wide = openacl.to_device(np.zeros(1000, np.int64))
    ops.inplace_random(wide, -(1 << 62), 1 << 62, 3, 0)  # a span past 2^32
    assert np.abs(wide.numpy()).max() > 1 << 40
    x.free()
    wide.free()


def test_bernoulli_scalar_and_tensor_probabilities():
    shape = (50_000,)
    out = ops.bernoulli(np.zeros(shape, np.float32), 0.3, 9, 0).numpy()
    assert set(np.unique(out)) == {0.0, 1.0}
    _near(out.mean(), 0.3, math.sqrt(0.21 / out.size))
    prob = np.tile(np.array([0.0, 1.0, 0.5], np.float32), 1000)
    out = ops.bernoulli_tensor(np.zeros(prob.shape, np.int32), prob, 9, 0).numpy()
    assert (out[0::3] == 0).all() and (out[1::3] == 1).all()
    _near(out[2::3].mean(), 0.5, math.sqrt(0.25 / 1000))
    target = openacl.to_device(np.zeros(1000, np.bool_))
    ops.inplace_bernoulli(target, 1.0, 1, 0)
    assert target.numpy().all()
    target.free()


def test_dropout_mask_scaling_and_its_siblings_agree():
    x = np.random.default_rng(0).uniform(-2, 2, (37, 61)).astype(np.float32)
    out, mask = ops.dropout(x, 0.25, True, 4, 8)
    out, mask = out.numpy(), mask.numpy()
    assert mask.shape == (mask_bytes(x.size),) == (288,)
    keep = np.unpackbits(mask, bitorder="little")
    assert not keep[x.size:].any()
    keep = keep[:x.size].reshape(x.shape).astype(bool)
    np.testing.assert_allclose(out, np.where(keep, x / 0.75, 0), rtol=1e-6)
    _near(1 - keep.mean(), 0.25, math.sqrt(0.1875 / x.size))
    np.testing.assert_array_equal(ops.dropout_gen_mask(list(x.shape), 0.25, 4, 8).numpy(), mask)
    np.testing.assert_allclose(ops.dropout_do_mask(x, mask, 0.25).numpy(), out, rtol=1e-6)
    np.testing.assert_allclose(ops.dropout_backward(x, mask, 1 / 0.75).numpy(), out,
                               rtol=1e-6)
    same, _ = ops.dropout(x, 0.25, False, 4, 8)
    np.testing.assert_array_equal(same.numpy(), x)  # not training: the input


def test_multinomial_with_and_without_replacement():
    weights = np.array([[0.1, 0.0, 0.9, 0.0], [1.0, 1.0, 1.0, 1.0]], np.float32)
    picked = ops.multinomial(weights, 2, False, 3, 0).numpy()
    assert picked.shape == (2, 2) and set(picked[0]) == {0, 2}
    assert len(set(picked[1])) == 2
    draws = ops.multinomial(weights[0], 20_000, True, 3, 0).numpy()
    assert set(np.unique(draws)) <= {0, 2}
    _near((draws == 2).mean(), 0.9, math.sqrt(0.09 / draws.size))


def test_randperm_is_a_permutation():
    perm = ops.randperm(1000, 5, 0).numpy()
    np.testing.assert_array_equal(np.sort(perm), np.arange(1000))
    assert not np.array_equal(perm, np.arange(1000))


@pytest.mark.parametrize("call,name", [
    (lambda: ops.dropout(np.ones(4, np.float32), 1.5, True, 0, 0), "p"),
    (lambda: ops.dropout(np.ones(4, np.int32), 0.5, True, 0, 0), "input"),
    (lambda: ops.bernoulli(np.ones(4, np.float32), -0.1, 0, 0), "prob"),
    (lambda: ops.dropout_do_mask(np.ones(4, np.float32), np.zeros(4, np.uint8), 0.5), "mask"),
    (lambda: ops.dropout_backward(np.ones(4, np.float32), np.zeros(16, np.uint8), 0.5),
     "scale"),
    (lambda: ops.multinomial(np.ones(3, np.float32), 4, False, 0, 0), "numsamples"),
    (lambda: ops.multinomial(np.ones((2, 2, 2), np.float32), 1, True, 0, 0), "self"),
    (lambda: ops.randperm(-1, 0, 0), "n"),
    (lambda: ops.dropout_gen_mask([4], 0.5, 0, -1), "offset"),
])
def test_bad_arguments_are_refused_naming_them(call, name):
    with pytest.raises(AclError) as info:
        call()
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and f"'{name}'" in info.value.message


def test_bad_fill_arguments():
    x = openacl.to_device(np.zeros(4, np.float32))
    with pytest.raises(AclError) as info:
        ops.inplace_normal(x, 0.0, -1.0, 0, 0)
    assert info.value.code == ACLNN_ERR_PARAM_INVALID and "'std'" in info.value.message
    with pytest.raises(AclError) as info:
        ops.inplace_random(x, 5, 5, 0, 0)
    assert "'from_'" in info.value.message
    small = openacl.to_device(np.zeros(4, np.int8))
    with pytest.raises(AclError) as info:
        ops.inplace_uniform(small, 0.0, 1000.0, 0, 0)
    assert "range of selfRef" in info.value.message
    with pytest.raises(AclError) as info:
        ops.inplace_normal_tensor(x, 0.0, 1.0, None, None, 0)
    assert info.value.code in (ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_PARAM_INVALID)
    x.free()
    small.free()

"""Convolution backward (aclnnConvolutionBackward): the gradients of aclnnConvolution's input,
weight and bias, as ``outputMask`` selects them, for 1d/2d/3d, strided, padded, dilated,
grouped and transposed convolutions (``torch.ops.aten.convolution_backward``'s semantics).

The gradients are convolutions themselves, computed with ``conv.py``'s kernels:

* ``gradInput`` of a convolution is the transposed convolution of ``gradOutput`` with the
  same weight (its output padding whatever makes it cover the input: a stride that does not
  divide the padded input leaves trailing rows that no output read, whose gradient is 0);
  of a transposed convolution it is the plain convolution of ``gradOutput``.
* ``gradWeight`` is one product per group of ``gradOutput`` with the im2col columns of the
  input (plain), or of the input with the columns of ``gradOutput`` (transposed).
* ``gradBias`` sums ``gradOutput`` over every dim but the channels.

Arguments are validated as aclnnConvolution's (``conv.py``); ``gradOutput`` must have the
forward result's shape. Outputs take the dtype of their tensor (gradInput: ``input``'s,
gradWeight: ``weight``'s, gradBias: ``gradOutput``'s); the computation runs in the promoted
dtype's compute dtype (float32 for float16 and bfloat16), ``cubeMathType`` as for the
forward (USE_FP16 rounds float32 operands to float16).
"""

from __future__ import annotations

import math

import numpy as np

from openacl.errors import ACLNN_ERR_PARAM_NULLPTR
from openacl.ops import native, promotion
from openacl.ops.call import Call, Kernel, TensorArg, array_module, as_array
from openacl.ops.conv import (
    CONV_DTYPES,
    MAX_DIMS,
    MIN_DIMS,
    Geometry,
    cast_operand,
    choose_body,
    columns_of,
    conv_attributes,
    run_body,
    windows_of,
)
from openacl.ops.linalg import CUBE_MATH_TYPES_NO_FP32_ADD, check_cube_math_type, operand_dtype
from openacl.ops.registry import register

__all__ = ["back_geometry", "convolution_backward", "gradients"]

MASK_LENGTH = 3  # outputMask: (gradInput, gradWeight, gradBias)
NATIVE_DIMS = 4  # the C im2col takes 2-d convolutions
GRADIENTS = ("gradInput", "gradWeight", "gradBias")


def _check_geometry(c: Call, x: TensorArg, w: TensorArg, grad: TensorArg, transposed: bool
                    ) -> Geometry:
    """Validate the forward convolution's arguments and ``gradOutput``'s shape against
    them; the forward geometry (out_size: the forward result's spatial size)."""
    if not MIN_DIMS <= x.ndim <= MAX_DIMS:
        raise c.fail("input", f"must have {MIN_DIMS} to {MAX_DIMS} dims (N, C, spatial...)")
    for name in ("weight", "gradOutput"):
        if c.tensor(name).ndim != x.ndim:
            raise c.fail(name, f"must have as many dims as 'input' ({x.ndim})")
    stride, dilation, pads, output_padding, groups = conv_attributes(c, x.ndim - 2,
                                                                     transposed)
    c_in, kernel = x.shape[1], w.shape[2:]
    if transposed:
        if w.shape[0] != c_in or c_in % groups:
            raise c.fail("weight", f"dim 0 must equal the input channels {c_in}, a multiple "
                                   f"of groups ({groups}), when transposed")
        c_out = w.shape[1] * groups
    else:
        if w.shape[0] % groups or w.shape[1] * groups != c_in:
            raise c.fail("weight", f"must be [C_out (a multiple of groups {groups}), "
                                   f"C_in / groups ({c_in} / {groups}), *kernel]")
        c_out = w.shape[0]
    extent = tuple(d * (k - 1) + 1 for d, k in zip(dilation, kernel, strict=True))
    if transposed:
        out_size = tuple((i - 1) * s + e + op - b - a for i, s, e, op, (b, a) in zip(
            x.shape[2:], stride, extent, output_padding, pads, strict=True))
    else:
        out_size = tuple((i + b + a - e) // s + 1 for i, (b, a), e, s in zip(
            x.shape[2:], pads, extent, stride, strict=True))
    if any(o <= 0 for o in out_size):
        raise c.fail("weight", f"the forward result's spatial size {list(out_size)} is empty")
    expected = (x.shape[0], c_out, *out_size)
    if grad.shape != expected:
        raise c.fail("gradOutput", f"must have the forward result's shape {list(expected)}")
    return Geometry(groups, stride, dilation, pads, output_padding, tuple(kernel), out_size,
                    False)


@register("ConvolutionBackward",
          "gradOutput: tensor, input: tensor, weight: tensor, biasSizes: int_array?, "
          "stride: int_array = None, padding: int_array = None, dilation: int_array = None, "
          "transposed: bool = False, outputPadding: int_array?, groups: int = 1, "
          "outputMask: bool_array = (True, True, True), cubeMathType: int = 0, "
          "gradInput: tensor!?, gradWeight: tensor!?, gradBias: tensor!?")
def convolution_backward(c: Call) -> Kernel:
    """The gradients of aclnnConvolution's input, weight and bias that ``outputMask``
    selects (a null output where its mask is False). ``stride``, ``padding`` and
    ``dilation`` are required (null is ACLNN_ERR_PARAM_NULLPTR), as in the forward."""
    grad, x, w = c.tensor("gradOutput"), c.tensor("input"), c.tensor("weight")
    for name in ("gradOutput", "input", "weight"):
        c.check_dtype(name, CONV_DTYPES)
    dtype = c.result_type("gradOutput", "input", "weight")
    cube = check_cube_math_type(c, CUBE_MATH_TYPES_NO_FP32_ADD)
    mask = c["outputMask"]
    if len(mask) != MASK_LENGTH:
        raise c.fail("outputMask", f"must have {MASK_LENGTH} values (gradInput, gradWeight, "
                                   f"gradBias)")
    transposed = bool(c["transposed"])
    g = _check_geometry(c, x, w, grad, transposed)
    c_out = grad.shape[1]
    if mask[2]:
        sizes = c["biasSizes"]
        if sizes is not None and tuple(sizes) != (c_out,):
            raise c.fail("biasSizes", f"must be [{c_out}] (the output channels)")
    for name, wanted, shape, like in zip(GRADIENTS, mask, (x.shape, w.shape, (c_out,)),
                                         (x, w, grad), strict=True):
        if wanted:
            if c[name] is None and not c.infer:
                raise c.fail(name, "is null but outputMask asks for it",
                             ACLNN_ERR_PARAM_NULLPTR)
            c.check_out(name, shape, like.dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    rounded = operand_dtype(dtype, cube)
    back = back_geometry(g, x.shape[2:], transposed)

    def kernel(v) -> None:
        gradients(v["gradOutput"], v["input"], v["weight"],
                  [v[name] if wanted else None for name, wanted in zip(GRADIENTS, mask,
                                                                       strict=True)],
                  g, back, transposed, rounded, compute)
    return kernel


def gradients(grad_output, x, w, targets, g: Geometry, back: Geometry, transposed: bool,
              rounded: np.dtype, compute: np.dtype) -> None:
    """Write the gradients of a convolution (N, C, *spatial layouts) into ``targets``
    (gradInput, gradWeight, gradBias arrays or views; None: not wanted). ``g`` is the
    forward geometry, ``back`` the one of gradInput's convolution (``back_geometry``)."""
    grad_input, grad_weight, grad_bias = targets
    dy = cast_operand(grad_output, rounded, compute)
    if grad_input is not None:
        weights = cast_operand(w, rounded, compute)
        flipped = None if transposed else _flipped_geometry(g, back)
        if flipped is not None:  # stride 1: a plain convolution with the flipped kernel
            weights, back, plain = _flipped_weights(weights, g.groups), flipped, True
        else:  # the transposed convolution (of a transposed one: the plain one)
            plain = transposed
        body, direct = choose_body(tuple(dy.shape), tuple(weights.shape), back, compute,
                                   not plain)
        _into(grad_input, lambda out: run_body(body, direct, out, dy, weights, None, back,
                                               compute), compute)
    if grad_weight is not None:
        inputs = cast_operand(x, rounded, compute)
        _into(grad_weight, lambda out: _weight_gradient(out, inputs, dy, g, back, transposed,
                                                        compute), compute)
    if grad_bias is not None:  # a plain sum (no Cube: cubeMathType's rounding not applied)
        wide = cast_operand(grad_output, compute, compute)
        total = as_array(wide).sum(axis=(0, *range(2, dy.ndim)), dtype=compute)
        array_module(grad_bias).copyto(grad_bias, total, casting="unsafe")


def back_geometry(g: Geometry, in_size: tuple[int, ...], transposed: bool) -> Geometry:
    """The geometry of gradInput's convolution: a plain convolution's gradient is the
    transposed one with the output padding that reaches the input's full padded size (a
    stride that does not divide it leaves trailing rows no output read: gradient 0); a
    transposed one's is the plain one (output size: the input's)."""
    cover = tuple(i + b + a - ((o - 1) * s + d * (k - 1) + 1) for i, (b, a), o, s, d, k in zip(
        in_size, g.pads, g.out_size, g.stride, g.dilation, g.kernel_size, strict=True))
    return Geometry(g.groups, g.stride, g.dilation, g.pads,
                    (0,) * len(cover) if transposed else cover, g.kernel_size, in_size, False)


def _flipped_geometry(g: Geometry, back: Geometry) -> Geometry | None:
    """A stride-1 convolution's gradInput as a plain convolution of gradOutput with the
    flipped, transposed kernel: padded by ``d (k - 1) - padding`` on each side. None when a
    stride is not 1 or a padding exceeds the dilated kernel (the transposed form is used)."""
    if any(s != 1 for s in g.stride):
        return None
    pads = tuple((d * (k - 1) - b, d * (k - 1) - a) for d, k, (b, a) in zip(
        g.dilation, g.kernel_size, g.pads, strict=True))
    if any(v < 0 for pair in pads for v in pair):
        return None
    return Geometry(g.groups, g.stride, g.dilation, pads, (0,) * len(pads), g.kernel_size,
                    back.out_size, False)


def _flipped_weights(w, groups: int):
    """(C_out, C_in/G, *k) -> (C_in, C_out/G, *k) with every spatial dim reversed: the
    kernel of the adjoint convolution, group by group."""
    c_out, c_group, *kernel = w.shape
    spatial = tuple(range(3, 3 + len(kernel)))
    per_group = w.reshape(groups, c_out // groups, c_group, *kernel).swapaxes(1, 2)
    flipped = array_module(w).flip(per_group, axis=spatial)
    return array_module(w).ascontiguousarray(flipped).reshape(groups * c_group,
                                                              c_out // groups, *kernel)


def _into(target, run, compute: np.dtype) -> None:
    """``run(out)`` into ``target``: straight in when it is a contiguous array of the
    compute dtype, else through a buffer copied in once."""
    if target.size == 0:
        return
    if target.dtype == compute and target.flags.c_contiguous:
        run(target)
        return
    xp = array_module(target)
    buffer = xp.empty(target.shape, compute)
    run(buffer)
    xp.copyto(target, buffer, casting="unsafe")


def _weight_gradient(out, x, dy, g: Geometry, back: Geometry, transposed: bool,
                     compute: np.dtype) -> None:
    """gradWeight: per group, the product of one operand's channels with the other's im2col
    columns (summed over the batch and positions)."""
    xp = array_module(out)
    groups = g.groups
    # plain: columns of the input under the forward geometry, rows of gradOutput;
    # transposed: columns of gradOutput under the backward one, rows of the input
    source, rows, geometry = (dy, x, back) if transposed else (x, dy, g)
    if 0 in source.shape or 0 in rows.shape:
        out[...] = 0
        return
    lib = native.kernels()
    if (lib is not None and groups == 1 and source.ndim == NATIVE_DIMS and compute == np.float32
            and native.host_float32(out) and type(source) is np.ndarray
            and type(rows) is np.ndarray):
        _weight_gradient_by_image(lib, out, np.ascontiguousarray(source, np.float32),
                                  np.ascontiguousarray(rows, np.float32), geometry)
        return
    columns = columns_of(windows_of(source, geometry, compute), geometry, compute)
    n, channels = rows.shape[:2]
    flat = xp.ascontiguousarray(rows.reshape(n, groups, channels // groups, -1)
                                .transpose(1, 2, 0, 3)).reshape(groups, channels // groups, -1)
    product = xp.matmul(flat, columns.transpose(0, 2, 1))  # (G, rows/G, other/G * taps)
    xp.copyto(out, product.reshape(out.shape[0], -1, *g.kernel_size), casting="unsafe")


def _weight_gradient_by_image(lib, out, source, rows, g: Geometry) -> None:
    """gradWeight of a 2-d float32 convolution with one group: per image, the C kernels'
    im2col of ``source`` (no padded copy, rows as memcpy runs) and one product with that
    image's ``rows``, accumulated (the columns of one image stay in cache)."""
    channels, taps = source.shape[1], math.prod(g.kernel_size)
    locations = math.prod(g.out_size)
    columns = np.empty((channels * taps, locations), np.float32)
    total = np.zeros((rows.shape[1], channels * taps), np.float32)
    for image in range(source.shape[0]):
        lib.im2col(source[image:image + 1], columns, source.shape[1:], g.kernel_size,
                   g.stride, tuple(b for b, _ in g.pads), g.dilation, g.out_size)
        total += rows[image].reshape(rows.shape[1], locations) @ columns.T
    # plain: (C_out, C_in * taps); transposed: (C_in, C_out * taps): the weight's order
    np.copyto(out, total.reshape(out.shape))

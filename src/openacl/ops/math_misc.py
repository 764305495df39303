"""Math operators of CANN's ops-math with no family of their own: Caffe's Scale layer, the
1-bit Adam sign packing, pairwise p-norm distances, the affine sampling grid, punica's LoRA
update, the grouped bias gradient, ExpSegsum's gradient, Sinkhorn's transport plan and the
attention input's bias-rescale-split.

Argument lists, dtype lists and refusals are CANN's (``hicann/ops-math``
``math/<op>/docs/aclnn<Op>.md`` and the op_api / tiling checks behind them, all raised in
phase 1 as ACLNN_ERR_PARAM_INVALID naming the argument); where a doc is silent the
semantics are PyTorch's (``pdist``, ``affine_grid``, ``_transform_bias_rescale_qkv``) or
those of the op's ATK harness. Every kernel computes in float64 and rounds once into its
output.
"""

from __future__ import annotations

import numpy as np

from openacl.ops import promotion
from openacl.ops.call import Call, Kernel, array_module, as_array
from openacl.ops.fpstate import quiet
from openacl.ops.indexing import host
from openacl.ops.registry import register

FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
UINT8 = np.dtype(np.uint8)
HALF_AND_SINGLE = frozenset({FLOAT16, promotion.BFLOAT16, FLOAT32})  # FLOAT, FLOAT16, BF16
SCALE_DTYPES = HALF_AND_SINGLE
SCALE_TO_LAST_AXIS = -1  # numAxes = -1: the scale covers x's dims from axis to the last
SIGN_BITS_DTYPES = frozenset({FLOAT16, FLOAT32})
BITS_PER_BYTE = 8  # SignBitsPack packs 8 signs into one uint8, the first in the lowest bit
PDIST_DTYPES = frozenset({FLOAT16, FLOAT32})
AFFINE_GRID_DTYPES = HALF_AND_SINGLE
AFFINE_2D_SIZE = 4  # size = (N, C, H, W): theta (N, 2, 3), grid (N, H, W, 2)
AFFINE_3D_SIZE = 5  # size = (N, C, D, H, W): theta (N, 3, 4), grid (N, D, H, W, 3)


# -- Scale ------------------------------------------------------------------------------------
def _scale_view(c: Call, x_shape: tuple[int, ...], scale_shape: tuple[int, ...]
                ) -> tuple[int, ...]:
    """The shape ``scale`` (and ``bias``) take to broadcast against ``x``: its dims placed at
    ``axis`` with ones elsewhere; CANN's rules for both ``scaleFromBlob`` settings."""
    rank = len(x_shape)
    axis, num_axes, from_blob = c["axis"], c["numAxes"], c["scaleFromBlob"]
    if not -rank <= axis < rank:
        raise c.fail("axis", f"must be in [{-rank}, {rank}) for a {rank}-dim x")
    if num_axes < SCALE_TO_LAST_AXIS:
        raise c.fail("numAxes", "must be >= -1 (-1: from axis to the last dim)")
    axis %= rank
    scale_size = int(np.prod(scale_shape))
    ones = (1,) * rank
    if from_blob:
        if num_axes == 0:
            if scale_size != 1:
                raise c.fail("scale", "must hold one element when numAxes is 0")
            return ones
        length = rank - axis if num_axes == SCALE_TO_LAST_AXIS else num_axes
        if axis + length > rank:
            raise c.fail("numAxes", f"axis {axis} + numAxes {num_axes} exceeds x's rank {rank}")
        expected = x_shape[axis:axis + length]
        if scale_shape != expected:
            raise c.fail("scale", f"shape must be {list(expected)} (x{list(x_shape)} from "
                                  f"axis {axis}, {length} dims)")
    else:
        length = len(scale_shape)
        if axis + length > rank:
            raise c.fail("scale", f"axis {axis} + scale's rank {length} exceeds x's rank {rank}")
        if scale_size == 1 and length <= 1:  # a scalar or a [1] scale broadcasts everywhere
            return ones
        if scale_shape != x_shape[axis:axis + length]:
            raise c.fail("scale", f"shape must equal x{list(x_shape)}'s dims from axis {axis}")
    return ones[:axis] + scale_shape + ones[axis + length:]


@register("Scale", "x: tensor, scale: tensor, bias: tensor?, axis: int = 0, numAxes: int = 1, "
                   "scaleFromBlob: bool = True, y: tensor!")
def scale(c: Call) -> Kernel:
    """Caffe's Scale layer: ``y = x * scale (+ bias)``, scale and bias laid along x's dims
    from ``axis`` (``numAxes`` of them with ``scaleFromBlob``, else scale's rank)."""
    dtype = c.check_dtype("x", SCALE_DTYPES)
    for name in ("scale", "bias"):
        if c[name] is not None and c.dtype(name) != dtype:
            raise c.fail(name, f"dtype must be x's ({dtype})")
    scale_shape = c.tensor("scale").shape
    if c["bias"] is not None and c.tensor("bias").shape != scale_shape:
        raise c.fail("bias", f"shape must be scale's {list(scale_shape)}")
    x_shape = c.tensor("x").shape
    view = _scale_view(c, x_shape, scale_shape)
    c.check_out("y", x_shape, dtype, exact_dtype=True)

    @quiet
    def kernel(v) -> None:
        result = as_array(v["x"]).astype(FLOAT64) * as_array(v["scale"]).astype(
            FLOAT64).reshape(view)
        if v.get("bias") is not None:
            result = result + as_array(v["bias"]).astype(FLOAT64).reshape(view)
        v.write("y", result)
    return kernel


# -- SignBitsPack -------------------------------------------------------------------------------
@register("SignBitsPack", "self: tensor, size: int, out: tensor!")
def sign_bits_pack(c: Call) -> Kernel:
    """1-bit Adam's packing (torch_npu.npu_sign_bits_pack): bit k of byte i is 1 when element
    ``8 i + k`` is not negative (+0, -0 and +inf give 1), a short last byte padded with
    zeros; the bytes reshaped to ``(size, bytes / size)``."""
    c.check_dtype("self", SIGN_BITS_DTYPES)
    x = c.tensor("self")
    if x.ndim != 1:
        raise c.fail("self", "must be 1-dim")
    size = c["size"]
    if size <= 0:
        raise c.fail("size", "must be positive")
    packed = -(-x.numel // BITS_PER_BYTE)
    if packed % size:
        raise c.fail("size", f"must divide the {packed} packed bytes of {x.numel} elements")
    c.check_out("out", (size, packed // size), UINT8, exact_dtype=True)

    def kernel(v) -> None:
        values = as_array(v["self"])
        xp = array_module(values)
        bits = xp.zeros(packed * BITS_PER_BYTE, UINT8)
        bits[:values.shape[0]] = ~(values < 0)
        weights = xp.asarray(1 << np.arange(BITS_PER_BYTE), dtype=UINT8)
        v.write("out", (bits.reshape(packed, BITS_PER_BYTE) * weights).sum(
            axis=1, dtype=UINT8).reshape(size, packed // size))
    return kernel


# -- PdistForward ---------------------------------------------------------------------------
def _p_norms(differences, p: float):
    """The p-norm of each row of ``differences`` (torch.pdist's p: 0 counts the nonzero
    entries, inf takes the largest; a NaN entry gives NaN); a general p divides by the row's
    largest entry first, so a large p neither overflows nor underflows."""
    xp = array_module(differences)
    magnitude = xp.abs(differences)
    if p == 0:
        return xp.minimum(xp.ceil(magnitude), 1.0).sum(axis=1)  # (torch's: NaN stays NaN)
    if p == 1:
        return magnitude.sum(axis=1)
    if p == 2:
        return xp.sqrt((magnitude * magnitude).sum(axis=1))
    largest = magnitude.max(axis=1) if magnitude.shape[1] else xp.zeros(magnitude.shape[0])
    if p == np.inf:
        return largest
    divisor = xp.where((largest == 0) | xp.isinf(largest), 1.0, largest)  # (NaN stays NaN)
    scaled = divisor * ((magnitude / divisor[:, None]) ** p).sum(axis=1) ** (1.0 / p)
    return xp.where(xp.isinf(largest), largest, scaled)


@register("PdistForward", "self: tensor, pScalar: scalar, out: tensor!")
def pdist_forward(c: Call) -> Kernel:
    """The p-norm distance of every pair of rows of a 2-dim ``self`` (torch.nn.functional.pdist):
    ``out`` holds d(0, 1), ..., d(0, N-1), d(1, 2), ..., d(N-2, N-1)."""
    dtype = c.check_dtype("self", PDIST_DTYPES)
    x = c.tensor("self")
    if x.ndim != 2:
        raise c.fail("self", "must be 2-dim [N, M]")
    p = float(c.scalar("pScalar", FLOAT64))
    if not p >= 0:
        raise c.fail("pScalar", "must be in [0, +inf]")
    rows = x.shape[0]
    c.check_out("out", (rows * (rows - 1) // 2,), dtype, exact_dtype=True)

    @quiet
    def kernel(v) -> None:
        values = as_array(v["self"]).astype(FLOAT64)
        xp = array_module(values)
        pieces = [_p_norms(values[i + 1:] - values[i], p) for i in range(rows - 1)]
        v.write("out", xp.concatenate(pieces) if pieces else xp.zeros(0, FLOAT64))
    return kernel


# -- AffineGrid ---------------------------------------------------------------------------------
def _grid_steps(count: int, align_corners: bool) -> np.ndarray:
    """torch's base grid along one dim: ``count`` points over [-1, 1] (pixel centres unless
    ``align_corners``), the single point 0 for a dim of 1."""
    if count <= 1:
        return np.zeros(count, FLOAT64)
    steps = np.linspace(-1.0, 1.0, count, dtype=FLOAT64)
    return steps if align_corners else steps * (count - 1) / count


@register("AffineGrid", "theta: tensor, size: int_array, alignCorners: bool = False, "
                        "out: tensor!")
def affine_grid(c: Call) -> Kernel:
    """The sampling grid of an affine map (torch.nn.functional.affine_grid): each output
    pixel's normalised (x, y[, z]) coordinates times ``theta``; a 2-D ``size`` (N, C, H, W)
    takes theta (N, 2, 3) and gives (N, H, W, 2), a 3-D one (N, C, D, H, W) takes (N, 3, 4)
    and gives (N, D, H, W, 3)."""
    dtype = c.check_dtype("theta", AFFINE_GRID_DTYPES)
    size = tuple(c["size"])
    if len(size) not in (AFFINE_2D_SIZE, AFFINE_3D_SIZE):
        raise c.fail("size", "must be (N, C, H, W) or (N, C, D, H, W)")
    if any(d < 0 for d in size):
        raise c.fail("size", "must not hold a negative dim")
    spatial = size[2:]
    coords = len(spatial)
    expected_theta = (size[0], coords, coords + 1)
    theta_shape = c.tensor("theta").shape
    if theta_shape != expected_theta:
        raise c.fail("theta", f"shape must be {list(expected_theta)} for size {list(size)}")
    c.check_out("out", (size[0], *spatial, coords), dtype, exact_dtype=True)
    align = bool(c["alignCorners"])
    # homogeneous base coordinates, x along the last spatial dim: (points, coords + 1)
    mesh = np.meshgrid(*(_grid_steps(n, align) for n in spatial), indexing="ij")[::-1]
    base = np.stack([m.reshape(-1) for m in mesh] + [np.ones(int(np.prod(spatial)))], axis=1)

    @quiet
    def kernel(v) -> None:
        theta = as_array(v["theta"]).astype(FLOAT64)
        xp = array_module(theta)
        grid = xp.matmul(xp.asarray(base)[None], xp.swapaxes(theta, 1, 2))
        v.write("out", grid.reshape(size[0], *spatial, coords))
    return kernel


# -- AddLora ------------------------------------------------------------------------------------
ADD_LORA_DTYPES = frozenset({FLOAT16})
ADD_LORA_INDEX_DTYPES = frozenset({np.dtype(np.int32)})
Y_SLICE_TO_H2 = -1  # ySliceSize = -1: the slice is weightB's H2 wide
WEIGHT_RANK = 4  # weightB [W, L, H2, R], weightA [W, L, R, H1]


def _add_lora_shapes(c: Call) -> tuple[int, int, int]:
    """CANN's shape rules for AddLora (its tiling's checks, refused here in phase 1): the
    batch B shared by y, x and indices; weightA's W, L and R matching weightB's; x's H1
    matching weightA's (or, without weightA, weightB's R); H2 <= H3. Returns (L, H2, H3)."""
    for name, rank in (("y", 2), ("x", 2), ("weightB", WEIGHT_RANK), ("indices", 1)):
        if c.tensor(name).ndim != rank:
            raise c.fail(name, f"must be {rank}-dim")
    batch, h3 = c.tensor("y").shape
    _, h1 = c.tensor("x").shape
    w, layers, h2, rank = c.tensor("weightB").shape
    if c.tensor("x").shape[0] != batch:
        raise c.fail("x", f"dim 0 must be y's batch {batch}")
    if c.tensor("indices").shape[0] != batch:
        raise c.fail("indices", f"must hold one index per row of y ({batch})")
    if h2 > h3:
        raise c.fail("weightB", f"dim 2 (H2 = {h2}) must not exceed y's dim 1 ({h3})")
    if c["weightAOptional"] is not None:
        expected = (w, layers, rank, h1)
        if c.tensor("weightAOptional").shape != expected:
            raise c.fail("weightAOptional", f"shape must be {list(expected)} ([W, L] and R of "
                                            f"weightB, H1 of x)")
    elif h1 != rank:
        raise c.fail("x", f"dim 1 must be weightB's R ({rank}) when weightAOptional is absent")
    return layers, h2, h3


@register("AddLora", "y: tensor, x: tensor, weightB: tensor, indices: tensor, "
                     "weightAOptional: tensor?, layerIdx: int = 0, scale: float = 1.0, "
                     "yOffset: int = 0, ySliceSize: int = -1, out: tensor!")
def add_lora(c: Call) -> Kernel:
    """Punica's batched LoRA update (vLLM's bgmv): each row b of x through its adapter
    ``indices[b]``, ``z = x_b A^T B^T * scale`` (A = weightA[i, layerIdx], skipped when
    absent; B = weightB[i, layerIdx]), added into ``y[b, yOffset:yOffset + ySliceSize]``.
    A row whose index is outside [0, W) (-1: no adapter) is y's row unchanged."""
    for name in ("y", "x", "weightB", "weightAOptional"):
        if c[name] is not None:
            c.check_dtype(name, ADD_LORA_DTYPES)
    c.check_dtype("indices", ADD_LORA_INDEX_DTYPES)
    layers, h2, h3 = _add_lora_shapes(c)
    layer, offset = c["layerIdx"], c["yOffset"]
    if not 0 <= layer < layers:
        raise c.fail("layerIdx", f"must be in [0, {layers}) (weightB's dim 1)")
    if not 0 <= offset < h3:
        raise c.fail("yOffset", f"must be in [0, {h3}) (y's dim 1)")
    if offset + h2 > h3:
        raise c.fail("yOffset", f"yOffset + H2 ({offset} + {h2}) must not exceed y's dim 1")
    width = h2 if c["ySliceSize"] == Y_SLICE_TO_H2 else c["ySliceSize"]
    if not 0 <= width <= h2:
        raise c.fail("ySliceSize", f"must be in [0, {h2}] (weightB's H2) or -1")
    c.check_out("out", c.tensor("y").shape, FLOAT16, exact_dtype=True)
    factor = float(c["scale"])

    @quiet
    def kernel(v) -> None:
        result = as_array(v["y"]).astype(FLOAT64)
        xp = array_module(result)
        x = as_array(v["x"]).astype(FLOAT64)
        weight_b = as_array(v["weightB"])[:, layer]
        weight_a = v.get("weightAOptional")
        indices = as_array(v["indices"])
        for adapter in range(weight_b.shape[0]):  # (W <= 32; an index outside: no adapter)
            rows = xp.flatnonzero(indices == adapter)
            if rows.size == 0:
                continue
            z = x[rows]
            if weight_a is not None:
                z = z @ as_array(weight_a)[adapter, layer].astype(FLOAT64).T
            z = z @ weight_b[adapter].astype(FLOAT64).T * factor
            result[rows, offset:offset + width] += z[:, :width]
        v.write("out", result)
    return kernel


# -- GroupedBiasAddGrad ---------------------------------------------------------------------------
GROUPED_BIAS_DTYPES = HALF_AND_SINGLE
GROUP_INDEX_DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.int64)})
MAX_BIAS_GROUPS = 2048  # CANN's limit on groupIdxOptional's length


@register("GroupedBiasAddGrad", "gradY: tensor, groupIdxOptional: tensor?, out: tensor!")
def grouped_bias_add_grad(c: Call) -> Kernel:
    """The bias gradient of a grouped bias add: with ``groupIdxOptional`` (each group's end
    row, cumulative) group j sums gradY's rows [end(j-1), end(j)) of a 2-dim gradY (an end
    before its start, an empty group: 0); without it a 3-dim (G, C, H) gradY sums over C."""
    dtype = c.check_dtype("gradY", GROUPED_BIAS_DTYPES)
    grad = c.tensor("gradY")
    grouped = c["groupIdxOptional"] is not None
    if grouped:
        c.check_dtype("groupIdxOptional", GROUP_INDEX_DTYPES)
        index = c.tensor("groupIdxOptional")
        if grad.ndim != 2:
            raise c.fail("gradY", "must be 2-dim (rows, H) with groupIdxOptional")
        if index.ndim != 1:
            raise c.fail("groupIdxOptional", "must be 1-dim")
        if index.shape[0] > MAX_BIAS_GROUPS:
            raise c.fail("groupIdxOptional", f"holds at most {MAX_BIAS_GROUPS} groups")
        groups = index.shape[0]
    else:
        if grad.ndim != 3:
            raise c.fail("gradY", "must be 3-dim (G, C, H) without groupIdxOptional")
        groups = grad.shape[0]
    c.check_out("out", (groups, grad.shape[-1]), dtype, exact_dtype=True)

    @quiet
    def kernel(v) -> None:
        values = as_array(v["gradY"]).astype(FLOAT64)
        if not grouped:
            v.write("out", values.sum(axis=1))
            return
        xp = array_module(values)
        rows = values.shape[0]
        # prefix sums in float64: group j is prefix[end] - prefix[start]
        prefix = xp.concatenate([xp.zeros((1, values.shape[1])), xp.cumsum(values, axis=0)])
        ends = xp.clip(as_array(v["groupIdxOptional"]).astype(np.int64), 0, rows)
        starts = xp.concatenate([xp.zeros(1, np.int64), ends[:-1]])
        sums = prefix[ends] - prefix[starts]
        v.write("out", xp.where((ends > starts)[:, None], sums, 0.0))
    return kernel


# -- ExpSegsumBackward ----------------------------------------------------------------------------
EXP_SEGSUM_DTYPES = HALF_AND_SINGLE
EXP_SEGSUM_RANKS = (4, 5)  # gradOutput (..., T, T) of rank 4 or 5; gradInput (..., T)


@register("ExpSegsumBackward", "gradOutput: tensor, gradSelf: tensor, gradInput: tensor!")
def exp_segsum_backward(c: Call) -> Kernel:
    """The gradient of ExpSegsum (Mamba-2's exp(segsum(x)), out[i, j] = exp(x[j+1] + ... +
    x[i]) for i >= j): with g = gradOutput * gradSelf, gradInput[k] is the sum of g[i, j]
    over j < k <= i, CANN's masked reverse cumsum over dim -2 summed over dim -1."""
    dtype = c.check_dtype("gradOutput", EXP_SEGSUM_DTYPES)
    grad = c.tensor("gradOutput")
    if grad.ndim not in EXP_SEGSUM_RANKS:
        raise c.fail("gradOutput", "must be 4-dim or 5-dim (..., T, T)")
    if grad.shape[-1] != grad.shape[-2]:
        raise c.fail("gradOutput", "its last two dims must be equal (T, T)")
    if c.dtype("gradSelf") != dtype or c.tensor("gradSelf").shape != grad.shape:
        raise c.fail("gradSelf", f"must have gradOutput's shape {list(grad.shape)} and dtype "
                                 f"{dtype}")
    c.check_out("gradInput", grad.shape[:-1], dtype, exact_dtype=True)
    steps = grad.shape[-1]
    below = np.tril(np.ones((steps, steps), np.bool_), -1)  # i > j: the segments' cells

    @quiet
    def kernel(v) -> None:
        product = as_array(v["gradOutput"]).astype(FLOAT64) * as_array(v["gradSelf"]).astype(
            FLOAT64)
        xp = array_module(product)
        keep = xp.asarray(below)
        product = xp.where(keep, product, 0.0)
        from_below = xp.flip(xp.cumsum(xp.flip(product, -2), axis=-2), -2)  # sum over i' >= i
        v.write("gradInput", xp.where(keep, from_below, 0.0).sum(axis=-1))
    return kernel


# -- Sinkhorn --------------------------------------------------------------------------------------
SINKHORN_DTYPES = HALF_AND_SINGLE
SINKHORN_MAX_COLUMNS = 4096  # CANN's op_api limit on cost's dim 1 (its doc says 1024)
SINKHORN_TOL = 1e-4  # tol when the aclScalar is null
SINKHORN_EPS = 1e-8  # CANN's guard in each normalisation's denominator
SINKHORN_MAX_ITERATIONS = 100_000  # a safety stop: a tol of 0 may never be met exactly


def _sinkhorn(cost, tol: float):
    """CANN's iteration on exp(cost): row then column scalings d0, d1 until the mean change
    of d1 is at most ``tol``; returns the transport plan d0[:, None] * exp(cost) * d1."""
    xp = array_module(cost)
    gibbs = xp.exp(cost)
    rows, columns = gibbs.shape
    d1 = xp.ones(columns)
    d0 = xp.ones(rows)
    for _ in range(SINKHORN_MAX_ITERATIONS):
        d0 = 1.0 / (rows * (gibbs @ d1 + SINKHORN_EPS))
        updated = 1.0 / (columns * (d0 @ gibbs + SINKHORN_EPS))
        error = float(xp.abs(d1 - updated).mean())
        d1 = updated
        if not error > tol:  # (a NaN error stops too)
            break
    return d0[:, None] * gibbs * d1


@register("Sinkhorn", "cost: tensor, tol: scalar?, p: tensor!")
def sinkhorn(c: Call) -> Kernel:
    """The Sinkhorn-Knopp optimal transport plan of a 2-dim cost (MoE expert routing):
    exp(cost) scaled by rows and columns in turn until the column scaling changes by at
    most ``tol`` (default 1e-4) on average."""
    dtype = c.check_dtype("cost", SINKHORN_DTYPES)
    cost = c.tensor("cost")
    if cost.ndim != 2:
        raise c.fail("cost", "must be 2-dim (rows, columns)")
    if cost.shape[1] > SINKHORN_MAX_COLUMNS:
        raise c.fail("cost", f"has more than {SINKHORN_MAX_COLUMNS} columns")
    tol = SINKHORN_TOL if c["tol"] is None else float(c.scalar("tol", FLOAT64))
    if c["p"] is not None:
        c.check_dtype("p", SINKHORN_DTYPES)
    c.check_out("p", cost.shape, dtype)

    @quiet
    def kernel(v) -> None:
        # on the host: the iteration is latency-bound (up to SINKHORN_MAX_ITERATIONS small
        # steps, each checked), where a device pays launches and a sync per step
        values = host(v["cost"]).astype(FLOAT64)
        v.write("p", _sinkhorn(values, tol) if values.size else values)
    return kernel


# -- TransformBiasRescaleQkv --------------------------------------------------------------------
QKV_DTYPES = HALF_AND_SINGLE
QKV_PARTS = 3  # qkv's last dim holds q, k and v, each num_heads * dim_per_head wide


@register("TransformBiasRescaleQkv", "qkv: tensor, qkvBias: tensor, numHeads: int, "
                                     "qOut: tensor!, kOut: tensor!, vOut: tensor!")
def transform_bias_rescale_qkv(c: Call) -> Kernel:
    """Attention's input projection split into heads (torch._transform_bias_rescale_qkv):
    qkv + qkvBias, its last dim cut into q, k, v of (num_heads, dim_per_head), each laid out
    (B, num_heads, T, dim_per_head); q divided by sqrt(dim_per_head)."""
    dtype = c.check_dtype("qkv", QKV_DTYPES)
    qkv = c.tensor("qkv")
    if qkv.ndim != 3:
        raise c.fail("qkv", "must be 3-dim (B, T, 3 * numHeads * dimPerHead)")
    bias = c.tensor("qkvBias")
    if c.dtype("qkvBias") != dtype:
        raise c.fail("qkvBias", f"dtype must be qkv's ({dtype})")
    if bias.shape != qkv.shape[-1:]:
        raise c.fail("qkvBias", f"shape must be [{qkv.shape[-1]}] (qkv's last dim)")
    heads = c["numHeads"]
    if heads <= 0:
        raise c.fail("numHeads", "must be positive")
    if qkv.shape[-1] % (QKV_PARTS * heads):
        raise c.fail("numHeads", f"3 * numHeads must divide qkv's last dim {qkv.shape[-1]}")
    batch, steps, width = qkv.shape
    head_dim = width // (QKV_PARTS * heads)
    for name in ("qOut", "kOut", "vOut"):
        c.check_out(name, (batch, heads, steps, head_dim), dtype, exact_dtype=True)

    @quiet
    def kernel(v) -> None:
        total = as_array(v["qkv"]).astype(FLOAT64) + as_array(v["qkvBias"]).astype(FLOAT64)
        xp = array_module(total)
        parts = xp.moveaxis(total.reshape(batch, steps, QKV_PARTS, heads, head_dim), 1, 3)
        v.write("qOut", parts[:, 0] / np.sqrt(head_dim) if head_dim else parts[:, 0])
        v.write("kOut", parts[:, 1])
        v.write("vOut", parts[:, 2])
    return kernel

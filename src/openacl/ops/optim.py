"""CANN's optim/ family: the optimizer steps ApplyAdamW, ApplyAdamWV2, ApplyFusedEmaAdam,
ApplyAdamWQuant (8-bit blockwise moments) and vLLM's decode bookkeeping AdvanceStep(V2).

Each updates its state tensors in place (``varRef``, ``mRef``, ``vRef``, ...), computing in
float32 (float64 for float64 state) and rounding once into each tensor, as a fused kernel
does. The formulas are the aclnn documents' (torch.optim.AdamW's for the two AdamW forms:
decoupled weight decay applied to the weight before the step, AMSGrad keeping the running
maximum of v, ``maximize`` negating the gradient).
"""

from __future__ import annotations

import numpy as np

from openacl.errors import ACLNN_ERR_INNER_TILING_ERROR
from openacl.ops import promotion
from openacl.ops.call import ACLNN_ERR_PARAM_NULLPTR, Call, Kernel, array_module
from openacl.ops.registry import register_inplace

__all__: list[str] = []

STATE_DTYPES = frozenset(np.dtype(t) for t in (np.float16, promotion.BFLOAT16, np.float32))
STEP_DTYPES = frozenset({np.dtype(np.int64), np.dtype(np.float32)})
EMA_STEP_DTYPES = frozenset({np.dtype(np.int64)})
EMA_MODES = {0: "L2", 1: "AdamW"}  # ApplyFusedEmaAdam's mode: weight decay as L2 or decoupled


def _required(c: Call, name: str) -> None:
    """A null in-place tensor is ACLNN_ERR_PARAM_NULLPTR (the call checks only inputs)."""
    if c[name] is None:
        raise c.fail(name, "is null", ACLNN_ERR_PARAM_NULLPTR)


def _states(c: Call, names: tuple[str, ...], like: str) -> np.dtype:
    """Every tensor of ``names`` has ``like``'s dtype (one of STATE_DTYPES) and shape."""
    _required(c, like)
    dtype = c.check_dtype(like, STATE_DTYPES)
    shape = c.tensor(like).shape
    for name in names:
        _required(c, name)
        if c.dtype(name) != dtype:
            raise c.fail(name, f"dtype must be {like}'s {dtype}")
        if c.tensor(name).shape != shape:
            raise c.fail(name, f"shape must be {like}'s {list(shape)}")
    return dtype


def _one_element(c: Call, name: str, allowed: frozenset) -> None:
    c.check_dtype(name, allowed)
    if c.tensor(name).numel != 1:
        raise c.fail(name, f"must hold one element, not {list(c.tensor(name).shape)}")


def _item(view: object) -> float:
    """The one value of a one-element tensor (read on the host)."""
    host = view if isinstance(view, np.ndarray) else view.get()
    return float(host.reshape(-1)[0])


def _adamw_step(v, compute: np.dtype, corrections: tuple[float, float], lr: float,
                beta1: float, beta2: float, weight_decay: float, eps: float, maximize: bool,
                running_max: tuple[str, str] | None) -> None:
    """One AdamW step on the views of ``v`` (torch.optim.AdamW's single-tensor update) with
    bias corrections ``(1 - beta1^t, 1 - beta2^t)``. ``running_max`` (AMSGrad): the view
    holding the previous maximum of v and the view that gets the new one."""
    var, m, s = (v.compute(n, compute) for n in ("varRef", "mRef", "vRef"))
    grad = v.compute("grad", compute)
    if maximize:
        grad = -grad
    var = var * compute.type(1 - lr * weight_decay)
    m = m * compute.type(beta1) + grad * compute.type(1 - beta1)
    s = s * compute.type(beta2) + grad * grad * compute.type(1 - beta2)
    second = s
    if running_max is not None:
        source, target = running_max
        second = np.maximum(v.compute(source, compute), s)
        if target == "vRef":
            s = second
        else:
            v.write(target, second)
    denom = np.sqrt(second / compute.type(corrections[1])) + compute.type(eps)
    v.write("varRef", var - compute.type(lr / corrections[0]) * m / denom)
    v.write("mRef", m)
    v.write("vRef", s)


def _apply_adam_w_v2(c: Call) -> Kernel:
    """AdamW with scalar hyper-parameters and the step count t in a one-element tensor;
    with amsgrad, ``maxGradNormOptionalRef`` keeps the running maximum of v. Each tensor may
    be of its own float dtype (CANN's host code checks each against the list, casts them
    all to float32 when they differ, and casts each result back to its tensor's dtype)."""
    names = ("varRef", "mRef", "vRef", "grad")
    amsgrad, maximize = bool(c["amsgrad"]), bool(c["maximize"])
    if amsgrad or c["maxGradNormOptionalRef"] is not None:
        names += ("maxGradNormOptionalRef",)
    shape = c.tensor("varRef").shape if c["varRef"] is not None else None
    dtypes = []
    for name in names:
        _required(c, name)
        dtypes.append(c.check_dtype(name, STATE_DTYPES))
        if c.tensor(name).shape != shape:
            raise c.fail(name, f"shape must be varRef's {list(shape)}")
    _one_element(c, "step", STEP_DTYPES)
    written = ("varRef", "mRef", "vRef") + (("maxGradNormOptionalRef",) if amsgrad else ())
    for name in written:
        c.check_out(name, c.tensor(name).shape, c.dtype(name), exact_dtype=True)
    dtype = dtypes[0] if len(set(dtypes)) == 1 else np.dtype(np.float32)
    lr, beta1, beta2 = float(c["lr"]), float(c["beta1"]), float(c["beta2"])
    weight_decay, eps = float(c["weightDecay"]), float(c["eps"])
    compute = promotion.compute_dtype(dtype)
    running_max = ("maxGradNormOptionalRef",) * 2 if amsgrad else None

    def kernel(v) -> None:
        step = _item(v["step"])
        if not step > 0:
            raise ValueError(f"step must be > 0, got {step}")
        _adamw_step(v, compute, (1 - beta1 ** step, 1 - beta2 ** step), lr, beta1, beta2,
                    weight_decay, eps, maximize, running_max)
    return kernel


register_inplace("ApplyAdamWV2", "varRef: tensor!, mRef: tensor!, vRef: tensor!, "
                 "maxGradNormOptionalRef: tensor!?, grad: tensor, step: tensor, "
                 "lr: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, "
                 "weightDecay: float = 0.01, eps: float = 1e-08, amsgrad: bool = False, "
                 "maximize: bool = False", _apply_adam_w_v2, varRef="varRef", mRef="mRef",
                 vRef="vRef", maxGradNormOptionalRef="maxGradNormOptionalRef")


ADAMW_SCALARS = ("beta1Power", "beta2Power", "lr", "weightDecay", "beta1", "beta2", "eps")


def _apply_adam_w(c: Call) -> Kernel:
    """AdamW with every hyper-parameter in a one-element tensor of the state's dtype and
    the powers beta1^(t-1), beta2^(t-1) given (this step's are ``beta1Power * beta1``);
    with amsgrad, vRef gets max(maxGradNormOptional, v)."""
    dtype = _states(c, ("mRef", "vRef", "grad"), "varRef")
    for name in ADAMW_SCALARS:
        _one_element(c, name, frozenset({dtype}))
    amsgrad, maximize = bool(c["amsgrad"]), bool(c["maximize"])
    if amsgrad:
        _states(c, ("maxGradNormOptional",), "varRef")
    for name in ("varRef", "mRef", "vRef"):
        c.check_out(name, c.tensor(name).shape, dtype, exact_dtype=True)
    compute = promotion.compute_dtype(dtype)
    running_max = ("maxGradNormOptional", "vRef") if amsgrad else None

    def kernel(v) -> None:
        value = {name: _item(v[name]) for name in ADAMW_SCALARS}
        beta1, beta2 = value["beta1"], value["beta2"]
        corrections = (1 - value["beta1Power"] * beta1, 1 - value["beta2Power"] * beta2)
        _adamw_step(v, compute, corrections, value["lr"], beta1, beta2,
                    value["weightDecay"], value["eps"], maximize, running_max)
    return kernel


register_inplace("ApplyAdamW", "varRef: tensor!, mRef: tensor!, vRef: tensor!, "
                 "beta1Power: tensor, beta2Power: tensor, lr: tensor, weightDecay: tensor, "
                 "beta1: tensor, beta2: tensor, eps: tensor, grad: tensor, "
                 "maxGradNormOptional: tensor?, amsgrad: bool = False, "
                 "maximize: bool = False", _apply_adam_w, varRef="varRef", mRef="mRef",
                 vRef="vRef")


def _apply_fused_ema_adam(c: Call) -> Kernel:
    """Adam (mode 0: weight decay as L2 on the gradient; 1: decoupled, AdamW) with optional
    bias correction, then the EMA copy of the weight: s = emaDecay * s + (1 - emaDecay) *
    var (the aclnn document's formulas)."""
    dtype = _states(c, ("varRef", "mRef", "vRef", "sRef"), "grad")
    c.check_dtype("step", EMA_STEP_DTYPES)  # its first element is the step count
    if c.tensor("step").numel < 1:
        raise c.fail("step", "is empty; its first element is the step count")
    mode = int(c["mode"])
    if mode not in EMA_MODES:
        raise c.fail("mode", f"expected one of {sorted(EMA_MODES)} (0 L2, 1 AdamW)")
    for name in ("varRef", "mRef", "vRef", "sRef"):
        c.check_out(name, c.tensor(name).shape, dtype, exact_dtype=True)
    lr, decay, beta1, beta2 = (float(c[n]) for n in ("lr", "emaDecay", "beta1", "beta2"))
    eps, weight_decay, bias_correction = float(c["eps"]), float(c["weightDecay"]), bool(
        c["biasCorrection"])
    compute = promotion.compute_dtype(dtype)
    one = compute.type(1)

    def kernel(v) -> None:
        step = _item(v["step"])
        corrections = (1 - beta1 ** step, 1 - beta2 ** step) if bias_correction else (1, 1)
        var, m, s, ema = (v.compute(n, compute) for n in ("varRef", "mRef", "vRef", "sRef"))
        grad = v.compute("grad", compute)
        if mode == 0:
            grad = grad + compute.type(weight_decay) * var
        m = compute.type(beta1) * m + (one - compute.type(beta1)) * grad
        s = compute.type(beta2) * s + (one - compute.type(beta2)) * grad * grad
        denom = np.sqrt(s / compute.type(corrections[1])) + compute.type(eps)
        update = (m / compute.type(corrections[0])) / denom
        if mode == 1:
            update = update + compute.type(weight_decay) * var
        var = var - compute.type(lr) * update
        v.write("varRef", var)
        v.write("mRef", m)
        v.write("vRef", s)
        v.write("sRef", compute.type(decay) * ema + (one - compute.type(decay)) * var)
    return kernel


register_inplace("ApplyFusedEmaAdam", "grad: tensor, varRef: tensor!, mRef: tensor!, "
                 "vRef: tensor!, sRef: tensor!, step: tensor, lr: float = 0.001, "
                 "emaDecay: float = 0.9999, beta1: float = 0.9, beta2: float = 0.999, "
                 "eps: float = 1e-08, mode: int = 1, biasCorrection: bool = True, "
                 "weightDecay: float = 0.0", _apply_fused_ema_adam, varRef="varRef",
                 mRef="mRef", vRef="vRef", sRef="sRef")


QUANT_BLOCK = 256  # ApplyAdamWQuant's blockSize: CANN's tiling takes only 256
QMAP_SIZE = 256  # one float32 code value per uint8 index
QMAP_BISECTIONS = 8  # log2(QMAP_SIZE): halvings that leave two adjacent candidates
CODE_DTYPES = frozenset({np.dtype(np.uint8)})  # mRef / vRef: indices into the maps
INT64_DTYPES = frozenset({np.dtype(np.int64)})
FLOAT32 = np.dtype(np.float32)
FLOAT32_DTYPES = frozenset({FLOAT32})


def _per_element(per_block, block: int, size: int):
    """Each block's value repeated over its ``block`` elements (``size`` in all)."""
    return array_module(per_block).repeat(per_block, block)[:size]


def _blocks_max(values, block: int, fill: float):
    """The maximum of each run of ``block`` consecutive elements of the flat ``values`` (the
    last run may be shorter; ``fill`` pads it)."""
    xp = array_module(values)
    blocks = -(-values.size // block)
    padded = xp.full(blocks * block, fill, values.dtype)
    padded[:values.size] = values
    return padded.reshape(blocks, block).max(axis=1)


def _quantize(state, qmap, absmax, block: int):
    """The uint8 code of each element of ``state`` (flat) in the ascending map ``qmap`` after
    dividing by its block's ``absmax`` (0 counts as 1), found as the document says, by
    bisection (the kernel's: QMAP_BISECTIONS halvings of [0, 255], then the nearer end, the
    lower on a tie; on an unsorted map this is what the kernel gives, not the nearest
    entry); then, for a signed map, moved one step towards the value where that entry has
    the opposite sign, so that a code keeps its value's sign (CANN's golden)."""
    xp = array_module(state)
    scale = xp.where(absmax == 0, state.dtype.type(1), absmax)
    normalized = state / _per_element(scale, block, state.size)
    lower = xp.zeros(state.size, np.int64)
    upper = xp.full(state.size, qmap.size - 1, np.int64)
    for _ in range(QMAP_BISECTIONS):
        pivot = (lower + upper) >> 1
        above = normalized > qmap[pivot]
        lower = xp.where(above, pivot, lower)
        upper = xp.where(above, upper, pivot)
    codes = xp.where(xp.abs(normalized - qmap[lower]) <= xp.abs(normalized - qmap[upper]),
                     lower, upper)
    if bool((qmap < 0).any()):
        flip = normalized * qmap[codes] < 0
        codes = codes + xp.where(flip & (normalized > 0), 1, 0) - xp.where(
            flip & (normalized < 0), 1, 0)
        codes = xp.clip(codes, 0, qmap.size - 1)
    return codes


def _apply_adam_w_quant(c: Call) -> Kernel:
    """AdamW on 8-bit blockwise-quantized moments (bitsandbytes' AdamW8bit): m and v are
    uint8 indices into the float32 maps qmapM / qmapV, scaled per block of ``blockSize``
    elements by absmaxMRef / absmaxVRef. The step dequantizes them, updates them (grad
    scaled by gnormScale), steps the weight (t = step + 1, as CANN's kernel counts; decoupled
    weight decay after the step when weightDecay > 0), then stores each block's new absmax
    (max |m|, max v) and the moments' nearest codes. Computes in float32, as the kernel."""
    dtype = _states(c, ("grad",), "varRef")
    shape = c.tensor("varRef").shape
    for name in ("mRef", "vRef"):
        _required(c, name)
        c.check_dtype(name, CODE_DTYPES)
        if c.tensor(name).shape != shape:
            raise c.fail(name, f"shape must be varRef's {list(shape)}")
    for name in ("qmapM", "qmapV"):
        c.check_dtype(name, FLOAT32_DTYPES)
        if c.tensor(name).shape != (QMAP_SIZE,):
            raise c.fail(name, f"shape must be [{QMAP_SIZE}], not {list(c.tensor(name).shape)}")
    block = int(c["blockSize"])
    if block != QUANT_BLOCK:
        raise c.fail("blockSize", f"must be {QUANT_BLOCK}", ACLNN_ERR_INNER_TILING_ERROR)
    size = c.tensor("varRef").numel
    blocks = -(-size // block)
    for name in ("absmaxMRef", "absmaxVRef"):
        _required(c, name)
        c.check_dtype(name, FLOAT32_DTYPES)
        if c.tensor(name).numel != blocks:
            raise c.fail(name, f"must hold ceil(varRef.size / blockSize) = {blocks} elements, "
                         f"not {c.tensor(name).numel}")
    _one_element(c, "step", INT64_DTYPES)
    code = np.dtype(np.uint8)
    for name, kind in (("varRef", dtype), ("mRef", code), ("vRef", code),
                       ("absmaxMRef", FLOAT32), ("absmaxVRef", FLOAT32)):
        c.check_out(name, c.tensor(name).shape, kind, exact_dtype=True)
    lr, beta1, beta2 = float(c["lr"]), float(c["beta1"]), float(c["beta2"])
    weight_decay, eps, gnorm_scale = (float(c[n]) for n in ("weightDecay", "eps", "gnormScale"))
    f32 = np.float32

    def kernel(v) -> None:
        t = _item(v["step"]) + 1
        correction1 = f32(1 - f32(beta1) ** f32(t))
        correction2 = np.sqrt(f32(1 - f32(beta2) ** f32(t)))
        step_size = f32(-lr) * correction2 / correction1
        qmap_m, qmap_v = v.compute("qmapM", FLOAT32), v.compute("qmapV", FLOAT32)
        absmax_m = v.compute("absmaxMRef", FLOAT32).reshape(-1)
        absmax_v = v.compute("absmaxVRef", FLOAT32).reshape(-1)
        m = qmap_m[v["mRef"].reshape(-1).astype(np.int64)] * _per_element(absmax_m, block, size)
        s = qmap_v[v["vRef"].reshape(-1).astype(np.int64)] * _per_element(absmax_v, block, size)
        grad = v.compute("grad", FLOAT32).reshape(-1) * f32(gnorm_scale)
        m = m * f32(beta1) + f32(1 - beta1) * grad
        s = s * f32(beta2) + f32(1 - beta2) * (grad * grad)
        var = v.compute("varRef", FLOAT32).reshape(-1)
        var = var + step_size * m / (np.sqrt(s) + f32(eps) * correction2)
        if weight_decay > 0:
            var = var * f32(1 - lr * weight_decay)
        new_m = _blocks_max(np.abs(m), block, 0.0)
        new_v = _blocks_max(s, block, -np.inf)
        v.write("varRef", var.reshape(shape))
        v.write("mRef", _quantize(m, qmap_m, new_m, block).reshape(shape))
        v.write("vRef", _quantize(s, qmap_v, new_v, block).reshape(shape))
        v.write("absmaxMRef", new_m.reshape(v["absmaxMRef"].shape))
        v.write("absmaxVRef", new_v.reshape(v["absmaxVRef"].shape))
    return kernel


register_inplace("ApplyAdamWQuant", "varRef: tensor!, grad: tensor, mRef: tensor!, "
                 "vRef: tensor!, qmapM: tensor, qmapV: tensor, absmaxMRef: tensor!, "
                 "absmaxVRef: tensor!, step: tensor, lr: float = 0.001, beta1: float = 0.9, "
                 "beta2: float = 0.999, weightDecay: float = 0.01, eps: float = 1e-08, "
                 "gnormScale: float = 1.0, quantModeOptional: str? = None, "
                 "blockSize: int = 256", _apply_adam_w_quant, varRef="varRef", mRef="mRef",
                 vRef="vRef", absmaxMRef="absmaxMRef", absmaxVRef="absmaxVRef")


PAD_SLOT = -1  # vLLM's slot of a padded sequence (no KV-cache slot)
STEP_REFS = ("inputTokens", "inputPositions", "seqLens", "slotMapping")
STEP_ALIASES = {name: name for name in STEP_REFS}


def _step_tensors(c: Call, names: tuple[str, ...]) -> None:
    """Every tensor of ``names`` is int64 (null: 161001)."""
    for name in names:
        _required(c, name)
        c.check_dtype(name, INT64_DTYPES)


def _step_attrs(c: Call) -> tuple[int, int, int]:
    """numSeqs, numQueries, blockSize: positive (a tiling error otherwise, as CANN's)."""
    values = tuple(int(c[n]) for n in ("numSeqs", "numQueries", "blockSize"))
    for name, value in zip(("numSeqs", "numQueries", "blockSize"), values, strict=True):
        if value < 1:
            raise c.fail(name, f"must be positive, got {value}", ACLNN_ERR_INNER_TILING_ERROR)
    return values


def _check_shape(c: Call, name: str, shape: tuple[int, ...]) -> None:
    if c.tensor(name).shape != shape:
        raise c.fail(name, f"shape must be {list(shape)}, not {list(c.tensor(name).shape)}",
                     ACLNN_ERR_INNER_TILING_ERROR)


def _block_tables(c: Call, num_seqs: int) -> None:
    table = c.tensor("blockTables").shape
    if len(table) != 2 or table[0] != num_seqs:
        raise c.fail("blockTables", f"shape must be [numSeqs={num_seqs}, blocks], not "
                     f"{list(table)}", ACLNN_ERR_INNER_TILING_ERROR)


def _slots(tables, rows, positions, block_size: int):
    """vLLM's KV-cache slot of each token: its sequence's block of the position, times
    blockSize, plus the offset in the block (positions past the table are refused)."""
    columns = positions // block_size
    if columns.size and (int(columns.min()) < 0 or int(columns.max()) >= tables.shape[1]):
        raise ValueError(f"a position needs block {int(columns.max())}, outside blockTables' "
                         f"{tables.shape[1]} blocks per sequence")
    return tables[rows, columns] * block_size + positions % block_size


def _advance_step(c: Call) -> Kernel:
    """vLLM's multi-step decode bookkeeping: each of the first numQueries sequences takes
    its sampled token as the next input, at position seqLens (then one longer), with its
    KV-cache slot; the padded sequences numQueries..numSeqs get token 0, position 0 and
    slot -1. The aclnn document's checks: 1-D state of numSeqs, sampledTokenIds
    [numQueries, 1], numSeqs > numQueries."""
    _step_tensors(c, STEP_REFS + ("sampledTokenIds", "blockTables"))
    num_seqs, num_queries, block_size = _step_attrs(c)
    if num_seqs <= num_queries:
        raise c.fail("numSeqs", f"must exceed numQueries ({num_queries}), got {num_seqs}",
                     ACLNN_ERR_INNER_TILING_ERROR)
    for name in STEP_REFS:
        _check_shape(c, name, (num_seqs,))
        c.check_out(name, (num_seqs,), np.dtype(np.int64), exact_dtype=True)
    _check_shape(c, "sampledTokenIds", (num_queries, 1))
    _block_tables(c, num_seqs)

    def kernel(v) -> None:
        xp = array_module(v["seqLens"])
        lengths = v["seqLens"].copy()
        positions = lengths[:num_queries].copy()
        tokens, places = xp.zeros(num_seqs, np.int64), xp.zeros(num_seqs, np.int64)
        slots = xp.full(num_seqs, PAD_SLOT, np.int64)
        tokens[:num_queries] = v["sampledTokenIds"][:, 0]
        places[:num_queries] = positions
        lengths[:num_queries] = positions + 1
        slots[:num_queries] = _slots(v["blockTables"], xp.arange(num_queries), positions,
                                     block_size)
        for name, value in zip(STEP_REFS, (tokens, places, lengths, slots), strict=True):
            v.write(name, value)
    return kernel


register_inplace("AdvanceStep", "inputTokens: tensor!, sampledTokenIds: tensor, "
                 "inputPositions: tensor!, seqLens: tensor!, slotMapping: tensor!, "
                 "blockTables: tensor, numSeqs: int, numQueries: int, blockSize: int",
                 _advance_step, **STEP_ALIASES)


def _advance_step_v2(c: Call) -> Kernel:
    """AdvanceStep for speculative decoding (vllm-ascend): each sequence carries 1 + specNum
    tokens (specNum = specToken's columns). Positions advance by acceptedNum + 1, seqLens
    become position + 1; a sequence's first input token is its last accepted sample (the
    one before its first -1 in sampledTokenIds), the rest its specToken drafts; slots as
    AdvanceStep's. The state tensors are flat [numSeqs * (1 + specNum)] (CANN's tiling; the
    document's [numSeqs, 1 + specNum] for inputTokens is taken too); numQueries ==
    numSeqs."""
    _step_tensors(c, STEP_REFS + ("sampledTokenIds", "blockTables", "specToken",
                                  "acceptedNum"))
    num_seqs, num_queries, block_size = _step_attrs(c)
    if num_seqs != num_queries:
        raise c.fail("numQueries", f"must equal numSeqs ({num_seqs}), got {num_queries}",
                     ACLNN_ERR_INNER_TILING_ERROR)
    spec = c.tensor("specToken").shape
    if len(spec) != 2 or spec[0] != num_seqs:
        raise c.fail("specToken", f"shape must be [numSeqs={num_seqs}, specNum], not "
                     f"{list(spec)}", ACLNN_ERR_INNER_TILING_ERROR)
    per_seq = 1 + spec[1]
    flat = (num_seqs * per_seq,)
    if c.tensor("inputTokens").shape != (num_seqs, per_seq):
        _check_shape(c, "inputTokens", flat)
    for name in STEP_REFS[1:]:
        _check_shape(c, name, flat)
    for name in STEP_REFS:
        c.check_out(name, c.tensor(name).shape, np.dtype(np.int64), exact_dtype=True)
    _check_shape(c, "sampledTokenIds", (num_seqs, per_seq))
    _check_shape(c, "acceptedNum", (num_seqs,))
    _block_tables(c, num_seqs)

    def kernel(v) -> None:
        xp = array_module(v["seqLens"])
        sampled = v["sampledTokenIds"]
        positions = v["inputPositions"] + xp.repeat(v["acceptedNum"], per_seq) + 1
        slots = _slots(v["blockTables"], xp.repeat(xp.arange(num_seqs), per_seq), positions,
                       block_size)
        # the first -1 ends the accepted samples (a row with none: its last column)
        ended = xp.concatenate([sampled, xp.full((num_seqs, 1), -1, sampled.dtype)], axis=1)
        last = (xp.argmin(ended, axis=1) - 1) % per_seq
        tokens = xp.empty((num_seqs, per_seq), np.int64)
        tokens[:, 0] = sampled[xp.arange(num_seqs), last]
        tokens[:, 1:] = v["specToken"]
        v.write("inputTokens", tokens.reshape(v["inputTokens"].shape))
        v.write("inputPositions", positions)
        v.write("seqLens", positions + 1)
        v.write("slotMapping", slots)
    return kernel


register_inplace("AdvanceStepV2", "inputTokens: tensor!, sampledTokenIds: tensor, "
                 "inputPositions: tensor!, seqLens: tensor!, slotMapping: tensor!, "
                 "blockTables: tensor, specToken: tensor, acceptedNum: tensor, numSeqs: int, "
                 "numQueries: int, blockSize: int", _advance_step_v2, **STEP_ALIASES)

"""Which family module registers which built-in operator: the registry imports a family when
one of its operators is first looked up (a model run loads only the families its steps use:
the tiny model's process stays ~1.6 MB smaller), and all of them when it is listed whole.

The table is checked against the families' own registrations by
``tests/test_ops_helpers.py``; ``python -m openacl.ops.catalog`` prints it afresh, and
``python -m openacl.ops.catalog --write`` replaces it in this file (atomically: a family that
fails to import leaves the file as it was).
"""

from __future__ import annotations

OPERATORS: dict[str, tuple[str, ...]] = {
    "activation": (
        "AddRelu", "Celu", "Elu", "Erfinv", "FastGelu", "Gelu", "GeluV2", "Hardshrink",
        "Hardsigmoid", "Hardswish", "Heaviside", "InplaceAddRelu", "InplaceCelu",
        "InplaceElu", "InplaceErfinv", "InplaceHardsigmoid", "InplaceHardswish",
        "InplaceLeakyRelu", "InplaceMish", "InplaceRReluWithNoise", "InplaceRelu",
        "InplaceSelu", "InplaceSigmoid", "InplaceThreshold", "LeakyRelu", "LogSigmoid",
        "LogSigmoidForward", "LogSoftmax", "Mish", "Prelu", "RReluWithNoise", "Relu",
        "ScaledMaskedSoftmax", "Selu", "Shrink", "Sigmoid", "Silu", "Softmax", "Softplus",
        "Softshrink", "SquaredRelu", "Swish", "Threshold",
    ),
    "activation_backward": (
        "ClippedSwigluGrad", "EluBackward", "FastGeluBackward", "GeGluBackward",
        "GeGluV3Backward", "GeluBackward", "GeluBackwardV2", "GluBackward",
        "HardshrinkBackward", "HardsigmoidBackward", "HardswishBackward",
        "HardswishBackwardV2", "HardtanhBackward", "LeakyReluBackward", "LogSigmoidBackward",
        "LogSoftmaxBackward", "MishBackward", "PreluBackward", "ScaledMaskedSoftmaxBackward",
        "SeluBackward", "SigmoidBackward", "SiluBackward", "SituGluGrad", "SoftmaxBackward",
        "SoftplusBackward", "SoftshrinkBackward", "SwiGluGrad", "SwishBackward",
        "TanhBackward", "ThresholdBackward",
    ),
    "activation_glu": (
        "ClippedSwiglu", "FatreluMul", "GeGlu", "GeGluV3", "GeluMul", "Glu", "SituGlu",
        "SwiGlu", "SwigluGroup",
    ),
    "arithmetic": (
        "Abs", "Acos", "Acosh", "Add", "AddV3", "Addcdiv", "Addcmul", "Adds", "Asin", "Asinh",
        "Atan", "Atan2", "Atanh", "Ceil", "Clamp", "ClampMax", "ClampMin", "ClampTensor",
        "Cos", "Cosh", "Div", "DivMod", "DivMods", "Divs", "Erf", "Exp", "Floor",
        "FloorDivide", "FloorDivides", "FmodScalar", "FmodTensor", "InplaceAbs",
        "InplaceAcos", "InplaceAcosh", "InplaceAdd", "InplaceAddV3", "InplaceAdds",
        "InplaceAsin", "InplaceAsinh", "InplaceAtan", "InplaceAtan2", "InplaceAtanh",
        "InplaceCeil", "InplaceCos", "InplaceCosh", "InplaceDiv", "InplaceDivMod",
        "InplaceDivMods", "InplaceDivs", "InplaceErf", "InplaceExp", "InplaceFloor",
        "InplaceFloorDivide", "InplaceFloorDivides", "InplaceLog", "InplaceLog1p",
        "InplaceLog2", "InplaceMul", "InplaceMuls", "InplaceNeg", "InplaceReciprocal",
        "InplaceRound", "InplaceRsqrt", "InplaceSign", "InplaceSin", "InplaceSinh",
        "InplaceSqrt", "InplaceSub", "InplaceSubs", "InplaceTan", "InplaceTanh", "Log",
        "Log1p", "Log2", "Maximum", "Minimum", "Mul", "Muls", "Neg", "PowScalarTensor",
        "PowTensorScalar", "PowTensorTensor", "Reciprocal", "RemainderScalarTensor",
        "RemainderTensorScalar", "RemainderTensorTensor", "Round", "Rsqrt", "Rsub", "Rsubs",
        "Sign", "Sin", "Sinh", "Sqrt", "Sub", "Subs", "Tan", "Tanh",
    ),
    "batch_norm_sync": (
        "BatchNormElemt", "BatchNormElemtBackward", "BatchNormGatherStatsWithCounts",
        "BatchNormReduceBackward", "BatchNormStats",
    ),
    "comparison": (
        "BitwiseAndScalar", "BitwiseAndTensor", "BitwiseAndTensorOut", "BitwiseNot",
        "BitwiseOrScalar", "BitwiseOrTensor", "BitwiseXorScalar", "BitwiseXorTensor",
        "EqScalar", "EqTensor", "Equal", "GeScalar", "GeTensor", "GtScalar", "GtTensor",
        "InplaceBitwiseAndScalar", "InplaceBitwiseAndTensor", "InplaceBitwiseAndTensorOut",
        "InplaceBitwiseOrScalar", "InplaceBitwiseOrTensor", "InplaceBitwiseXorScalar",
        "InplaceBitwiseXorTensor", "InplaceEqScalar", "InplaceEqTensor", "InplaceGeScalar",
        "InplaceGeTensor", "InplaceGtScalar", "InplaceGtTensor", "InplaceLeScalar",
        "InplaceLeTensor", "InplaceLogicalAnd", "InplaceLogicalNot", "InplaceLogicalOr",
        "InplaceLtScalar", "InplaceLtTensor", "InplaceNeScalar", "InplaceNeTensor", "IsClose",
        "IsFinite", "IsInf", "IsNegInf", "IsPosInf", "LeScalar", "LeTensor", "LogicalAnd",
        "LogicalNot", "LogicalOr", "LogicalXor", "LtScalar", "LtTensor", "NeScalar",
        "NeTensor", "SWhere",
    ),
    "conv": (
        "Convolution",
    ),
    "conv_backward": (
        "ConvolutionBackward",
    ),
    "conv_variants": (
        "ConvDepthwise2d", "ConvTbc", "ConvTbcBackward", "DeformableConv2d",
        "QuantConvolution",
    ),
    "creation": (
        "Eye", "InplaceOne", "Linspace", "Range", "Repeat",
    ),
    "ctc": (
        "CtcLoss", "CtcLossBackward",
    ),
    "determinant": (
        "Slogdet",
    ),
    "elementwise_math": (
        "AngleV2", "InplaceLerp", "InplaceLerps", "InplaceNanToNum",
        "InplaceXLogYScalarOther", "InplaceXLogYTensor", "Lerp", "Lerps", "LinalgCross",
        "LogAddExp", "LogAddExp2", "NanToNum", "Polar", "XLogYScalarOther", "XLogYScalarSelf",
        "XLogYTensor",
    ),
    "embeddings": (
        "EmbeddingBag", "EmbeddingDenseBackward", "EmbeddingRenorm",
    ),
    "experimental": (
        "AddMatMatElementsPlus", "ApplyGradientDescent", "FusedMulAddN",
    ),
    "foreach": (
        "ForeachACosInplace", "ForeachAbs", "ForeachAcos", "ForeachAddList",
        "ForeachAddListInplace", "ForeachAddListV2", "ForeachAddScalar",
        "ForeachAddScalarList", "ForeachAddScalarV2", "ForeachAddcdivList",
        "ForeachAddcdivScalar", "ForeachAddcdivScalarList", "ForeachAddcdivScalarV2",
        "ForeachAddcmulList", "ForeachAddcmulScalar", "ForeachAddcmulScalarList",
        "ForeachAddcmulScalarV2", "ForeachAsin", "ForeachAtan", "ForeachCopy", "ForeachCos",
        "ForeachCosh", "ForeachDivList", "ForeachDivListInplace", "ForeachDivScalar",
        "ForeachDivScalarList", "ForeachDivScalarV2", "ForeachErf", "ForeachErfc",
        "ForeachExp", "ForeachExpm1", "ForeachLerpList", "ForeachLerpScalar", "ForeachLog",
        "ForeachLog10", "ForeachLog1p", "ForeachLog2", "ForeachLogInplace",
        "ForeachMaximumList", "ForeachMaximumScalar", "ForeachMaximumScalarList",
        "ForeachMaximumScalarV2", "ForeachMinimumList", "ForeachMinimumScalar",
        "ForeachMinimumScalarList", "ForeachMinimumScalarV2", "ForeachMulList",
        "ForeachMulListInplace", "ForeachMulScalar", "ForeachMulScalarInplace",
        "ForeachMulScalarList", "ForeachMulScalarV2", "ForeachNeg",
        "ForeachNonFiniteCheckAndUnscale", "ForeachNorm", "ForeachPowList",
        "ForeachPowScalar", "ForeachPowScalarAndTensor", "ForeachPowScalarList",
        "ForeachPowScalarV2", "ForeachReciprocal", "ForeachRoundOffNumber",
        "ForeachRoundOffNumberV2", "ForeachSigmoid", "ForeachSign", "ForeachSin",
        "ForeachSinh", "ForeachSqrt", "ForeachSubList", "ForeachSubListInplace",
        "ForeachSubListV2", "ForeachSubScalar", "ForeachSubScalarInplace",
        "ForeachSubScalarList", "ForeachSubScalarV2", "ForeachTan", "ForeachTanh",
        "ForeachZeroInplace",
    ),
    "fused_linear": (
        "FusedLinearCrossEntropyLossGrad", "FusedLinearOnlineMaxSum",
    ),
    "fused_norm": (
        "AdaLayerNorm", "DeepNorm", "GroupNormSilu", "GroupNormSiluV2", "GroupNormSwish",
        "MaskedSoftmaxWithRelPosBias",
    ),
    "indexing": (
        "ExpandIntoJaggedPermute", "GatherV2", "GatherV3", "Index", "IndexAdd", "IndexAddV2",
        "IndexFill", "IndexFillTensor", "IndexPutImpl", "InplaceIndexFill",
        "InplaceIndexFillTensor", "InplaceMaskedScatter", "Take",
    ),
    "linalg": (
        "Addbmm", "Addmm", "Addmv", "Baddbmm", "BatchMatMul", "Einsum", "FusedMatmul", "Gemm",
        "InplaceAddbmm", "InplaceAddmm", "InplaceBaddbmm", "Matmul", "Mm", "Mv",
    ),
    "loss": (
        "BinaryCrossEntropy", "BinaryCrossEntropyWithLogits", "CrossEntropyLoss",
        "FusedCrossEntropyLossWithMaxSum", "KlDiv", "L1Loss", "Logit", "MseLoss",
        "MseLossOut", "MultilabelMarginLoss", "NLLLoss", "NLLLoss2d", "SmoothL1Loss",
        "SoftMarginLoss", "SoftmaxCrossEntropyWithLogits",
    ),
    "loss_backward": (
        "BinaryCrossEntropyBackward", "BinaryCrossEntropyWithLogitsBackward",
        "ChamferDistanceBackward", "CrossEntropyLossGrad", "KlDivBackward", "L1LossBackward",
        "LogitGrad", "MseLossBackward", "NLLLoss2dBackward", "NLLLossBackward",
        "SmoothL1LossBackward", "SoftMarginLossBackward",
    ),
    "masking": (
        "Arange", "ClampMaxTensor", "ClampMinTensor", "DiagFlat", "Hardtanh",
        "InplaceClampMaxTensor", "InplaceClampMinTensor", "InplaceFillDiagonal",
        "InplaceFillScalar", "InplaceFillTensor", "InplaceHardtanh",
        "InplaceMaskedFillScalar", "InplaceMaskedFillTensor", "InplaceZero", "MaskedSelect",
        "OneHot",
    ),
    "math_misc": (
        "AddLora", "AffineGrid", "ExpSegsumBackward", "GroupedBiasAddGrad", "PdistForward",
        "Scale", "SignBitsPack", "Sinkhorn", "TransformBiasRescaleQkv",
    ),
    "movement": (
        "Cast", "Cat", "ChannelShuffle", "Embedding", "Expand", "Flatten", "Flip", "Gather",
        "GatherNd", "IndexSelect", "InplaceCopy", "InplaceScatterUpdate", "InplaceTril",
        "InplaceTriu", "Permute", "Roll", "Slice", "SliceV2", "SplitTensor", "SplitWithSize",
        "Stack", "StridedSliceAssignV2", "Tril", "Triu", "UnfoldGrad", "UpsampleBilinear2d",
        "UpsampleNearest2d",
    ),
    "norm_backward": (
        "AddLayerNormGrad", "BatchNormBackward", "DeepNormGrad", "GroupNormBackward",
        "GroupNormSwishGrad", "LayerNormBackward", "RmsNormGrad",
    ),
    "normalization": (
        "AddLayerNorm", "AddRmsNorm", "BatchNorm", "GemmaRmsNorm", "GroupNorm",
        "InstanceNorm", "LayerNorm", "LayerNormWithImplMode", "RmsNorm",
    ),
    "optim": (
        "AdvanceStep", "AdvanceStepV2", "ApplyAdamW", "ApplyAdamWQuant", "ApplyAdamWV2",
        "ApplyFusedEmaAdam",
    ),
    "padding": (
        "CircularPad2d", "CircularPad2dBackward", "CircularPad3d", "CircularPad3dBackward",
        "ConstantPadNd", "ReflectionPad1d", "ReflectionPad1dBackward", "ReflectionPad2d",
        "ReflectionPad2dBackward", "ReflectionPad3d", "ReflectionPad3dBackward",
        "ReplicationPad1d", "ReplicationPad1dBackward", "ReplicationPad2d",
        "ReplicationPad2dBackward", "ReplicationPad3d", "ReplicationPad3dBackward",
    ),
    "pooling": (
        "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool2d", "GlobalAveragePool",
        "GlobalMaxPool", "MaxPool", "MaxPool2dWithIndices", "MaxPool2dWithMask",
    ),
    "pooling3d": (
        "AdaptiveAvgPool3d", "AdaptiveAvgPool3dBackward", "AdaptiveMaxPool3d",
        "AdaptiveMaxPool3dBackward", "AvgPool3d", "AvgPool3dBackward", "MaxPool3dWithArgmax",
        "MaxPool3dWithArgmaxBackward",
    ),
    "pooling_backward": (
        "AdaptiveAvgPool2dBackward", "AdaptiveMaxPool2dBackward", "AvgPool2dBackward",
        "MaxPool2dWithIndicesBackward", "MaxPool2dWithMaskBackward",
    ),
    "quant_matmul": (
        "QuantMatmulV3", "QuantMatmulV4", "QuantMatmulWeightNz", "TransQuantParamV2",
        "WeightQuantBatchMatmulV2", "WeightQuantBatchMatmulV3",
    ),
    "quantization": (
        "AscendAntiQuant", "AscendQuant", "AscendQuantV3", "DequantBias", "DynamicQuant",
        "FakeQuantPerChannelAffineCachemask", "FakeQuantPerTensorAffineCachemask",
        "FlatQuant", "GroupQuant", "Quantize",
    ),
    "quantized_fused": (
        "AddRmsNormQuant", "DequantSwigluQuantV2", "GroupNormSiluQuant",
    ),
    "quantized_norm": (
        "QuantizedBatchNorm",
    ),
    "random": (
        "Bernoulli", "BernoulliTensor", "Dropout", "DropoutBackward", "DropoutDoMask",
        "DropoutGenMask", "DropoutGenMaskV2", "DropoutGenMaskV2Tensor", "InplaceBernoulli",
        "InplaceBernoulliTensor", "InplaceNormal", "InplaceNormalTensor", "InplaceRandom",
        "InplaceRandomTensor", "InplaceUniform", "Multinomial", "MultinomialTensor",
        "Randperm",
    ),
    "reduction": (
        "All", "Amax", "Amin", "Any", "ArgMax", "ArgMin", "Argsort", "Cummax", "Cumsum",
        "CumsumV2", "Dot", "Max", "MaxDim", "MaxV2", "Mean", "MeanV2", "Min", "MinDim",
        "Prod", "ProdDim", "ReduceSum", "Sort", "Std", "StdMeanCorrection", "Topk", "Trace",
        "Var", "VarCorrection",
    ),
    "repeating": (
        "RepeatInterleave", "RepeatInterleaveInt", "RepeatInterleaveIntWithDim",
        "RepeatInterleaveTensor", "RepeatInterleaveWithDim",
    ),
    "rnn": (
        "BidirectionLSTM", "GRU",
    ),
    "scattering": (
        "InplaceScatter", "InplaceScatterReduce", "InplaceScatterValue", "Scatter",
        "ScatterAdd", "ScatterList", "ScatterNd", "ScatterNdUpdate", "ScatterReduce",
        "ScatterValue", "TfScatterAdd",
    ),
    "selection": (
        "ApplyTopKTopP", "Kthvalue", "Median", "MedianDim", "NanMedian", "NanMedianDim",
        "Nonzero", "NonzeroV2", "TopKTopPSampleV2", "Unique", "Unique2", "UniqueDim",
    ),
    "statistics": (
        "Bincount", "Histc",
    ),
    "unpooling": (
        "MaxUnpool2d", "MaxUnpool2dBackward", "MaxUnpool3d", "MaxUnpool3dBackward",
    ),
    "vector_fusion": (
        "Modulate",
    ),
    "vector_norm": (
        "InplaceRenorm", "LinalgVectorNorm", "Norm", "Renorm",
    ),
}


def _fresh_table() -> str:
    """The table as the families register it now (imports every family)."""
    import collections
    import importlib
    import textwrap

    from openacl.ops import FAMILIES
    from openacl.ops.registry import REGISTRY, builtin_module

    for family in FAMILIES:  # a new family module is in no table yet: import it by name
        importlib.import_module(f"openacl.ops.{family}")

    families = collections.defaultdict(list)
    for name, op in REGISTRY.items():
        module = builtin_module(op)
        if module is not None:
            families[module].append(name)
    lines = []
    for family in sorted(families):
        names = ", ".join(f'"{n}"' for n in sorted(families[family]))
        body = textwrap.fill(names, width=94, initial_indent=" " * 8,
                             subsequent_indent=" " * 8)
        lines.append(f'    "{family}": (\n{body},\n    ),')
    return "OPERATORS: dict[str, tuple[str, ...]] = {\n" + "\n".join(lines) + "\n}"


def _write_table() -> None:
    """Replace the table in this file with a fresh one (write a sibling, then rename)."""
    import os
    import re
    from pathlib import Path

    path = Path(__file__)
    text = path.read_text()
    table = re.compile(r"^OPERATORS: dict\[str, tuple\[str, \.\.\.\]\] = \{\n.*?^\}$",
                       re.MULTILINE | re.DOTALL)
    fresh, count = table.subn(lambda _: _fresh_table(), text, count=1)
    if count != 1:
        raise SystemExit(f"{path}: the OPERATORS table was not found")
    scratch = path.with_suffix(".py.new")
    scratch.write_text(fresh)
    os.replace(scratch, path)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:
        _write_table()
    else:
        print(_fresh_table())

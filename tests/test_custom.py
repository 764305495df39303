"""Custom operators (FrameworkLaunch): declaration checks, the generated APIs in both faces
and by name, dtype/format columns, tiling, blocks, non-contiguous views and packages.

Every operator a test registers is removed again by the autouse ``_custom_ops_removed``
fixture, so tests are independent and may reuse operator names.
"""

from __future__ import annotations

import inspect
import os
import threading
from dataclasses import dataclass

import numpy as np
import pytest

import openacl
from device_io import to_host
from op_harness import strided
from openacl import aclnn, custom
from openacl import op as aclop
from openacl.compat import aclnn as c
from openacl.custom import DYNAMIC, OPTIONAL, REQUIRED, OpDef, TilingData
from openacl.errors import (
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_KERNEL_ALREADY_REGISTERED,
    ACL_ERROR_KERNEL_NOT_FOUND,
    ACL_ERROR_OP_LOAD_FAILED,
    ACL_ERROR_OP_NOT_FOUND,
    ACL_ERROR_RT_AICORE_EXCEPTION,
    ACL_SUCCESS,
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
)
from openacl.ops.registry import REGISTRY
from openacl.tensor import create_data_buffer, create_tensor_desc, create_tensor_list

F16, F32, I32 = openacl.ACL_FLOAT16, openacl.ACL_FLOAT, openacl.ACL_INT32
ND, NCHW = openacl.ACL_FORMAT_ND, openacl.ACL_FORMAT_NCHW
BARRIER_TIMEOUT_S = 5.0  # blocks that never meet fail instead of hanging


@pytest.fixture(autouse=True)
def _custom_ops_removed():
    """Unregister every operator a test added, whatever way it was added."""
    before = set(REGISTRY)
    yield
    for name in set(REGISTRY) - before:
        custom.unregister_op(name)


# -- helpers ------------------------------------------------------------------------------------
def span(n: int) -> tuple[int, int]:
    """This block's [start, stop) of ``n`` elements split in ceil-sized chunks."""
    per_block = -(-n // custom.get_block_num())
    start = custom.get_block_idx() * per_block
    return min(n, start), min(n, start + per_block)


def one_block(ctx) -> None:
    ctx.set_block_dim(1)


def add_kernel(x, y, z, workspace, tiling) -> None:
    start, stop = span(z.size)
    z.reshape(-1)[start:stop] = x.reshape(-1)[start:stop] + y.reshape(-1)[start:stop]


def add_op(name: str = "AddCustom", block_dim: int = 4, kernel=add_kernel) -> OpDef:
    """z = x + y over float16 or float32 columns, ND."""
    def tiling(ctx) -> None:
        ctx.set_block_dim(block_dim)

    op = OpDef(name)
    for param in ("x", "y"):
        op.input(param).param_type(REQUIRED).data_type([F16, F32]).format([ND, ND])
    op.output("z").param_type(REQUIRED).data_type([F16, F32]).format([ND, ND])
    return op.set_tiling(tiling).set_kernel(kernel)


def dev(array) -> openacl.Tensor:
    return openacl.to_device(np.asarray(array))


def data(shape, dtype=np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-4, 4, shape).astype(dtype)


def two_phase(snake: str, *args, stream=0, workspace: int = 0) -> int:
    """Run aclnn.<snake> through both phases; returns the workspace size phase 1 asked for."""
    size, executor = getattr(aclnn, f"{snake}_get_workspace_size")(*args)
    ptr = openacl.rt.malloc(size) if size and not workspace else workspace
    getattr(aclnn, snake)(ptr, size, executor, stream)
    openacl.rt.synchronize_stream(stream)
    return size


def raises(code: int, *fragments: str):
    """Context manager: an AclError with ``code`` whose message holds every fragment."""
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


# -- declaration errors at register_op ---------------------------------------------------------
def test_no_inputs_or_no_outputs_is_refused():
    op = OpDef("NoInputCustom")
    op.output("z").data_type([F32])
    op.set_tiling(one_block).set_kernel(lambda z, w, t: None)
    with raises(ACL_ERROR_INVALID_PARAM, "NoInputCustom"):
        custom.register_op(op)
    op = OpDef("NoOutputCustom")
    op.input("x").data_type([F32])
    op.set_tiling(one_block).set_kernel(lambda x, w, t: None)
    with raises(ACL_ERROR_INVALID_PARAM, "NoOutputCustom"):
        custom.register_op(op)
    assert "NoInputCustom" not in REGISTRY and "NoOutputCustom" not in REGISTRY


def test_data_type_lists_of_different_lengths_are_refused():
    op = add_op()
    op.outputs[0].data_type([F32])
    with raises(ACL_ERROR_INVALID_PARAM, "same number"):
        custom.register_op(op)
    op = add_op()
    for param in op.inputs + op.outputs:
        param.data_type([])
    with raises(ACL_ERROR_INVALID_PARAM):
        custom.register_op(op)
    assert "AddCustom" not in REGISTRY


def test_format_count_must_match_data_types():
    op = add_op()
    op.inputs[1].format([ND])
    with raises(ACL_ERROR_INVALID_PARAM, "'y'", "formats"):
        custom.register_op(op)


def test_optional_output_is_refused():
    op = add_op()
    op.outputs[0].param_type(OPTIONAL)
    with raises(ACL_ERROR_INVALID_PARAM, "'z'", "optional"):
        custom.register_op(op)


def test_bad_param_and_attr_type_are_refused():
    op = add_op()
    with raises(ACL_ERROR_INVALID_PARAM):
        op.inputs[0].param_type("sometimes")
    with raises(ACL_ERROR_INVALID_PARAM):
        op.attr("alpha").attr_type(DYNAMIC)


def test_attr_without_type_is_refused():
    op = add_op()
    op.attr("alpha").attr_type(OPTIONAL)
    with raises(ACL_ERROR_INVALID_PARAM, "'alpha'", "no type"):
        custom.register_op(op)


def test_missing_tiling_or_kernel_is_kernel_not_found():
    op = add_op()
    op.tiling = None
    with raises(ACL_ERROR_KERNEL_NOT_FOUND, "set_tiling"):
        custom.register_op(op)
    op = add_op()
    op.kernel = None
    with raises(ACL_ERROR_KERNEL_NOT_FOUND, "set_kernel"):
        custom.register_op(op)
    assert "AddCustom" not in REGISTRY


def test_kernel_arity_must_match_declaration():
    def too_few(x, y, z, workspace) -> None:
        pass

    def too_many(x, y, z, extra, workspace, tiling) -> None:
        pass

    for kernel in (too_few, too_many):
        with raises(ACL_ERROR_KERNEL_NOT_FOUND, kernel.__name__, "x, y, z, workspace, tiling"):
            custom.register_op(add_op(kernel=kernel))
    # variadic kernels and keyword-only extras are accepted
    custom.register_op(add_op("VarCustom", kernel=lambda *args: None))
    custom.register_op(add_op("KwCustom", kernel=lambda x, y, z, w, t, *, k=1: None))


@pytest.mark.parametrize("name", ["addCustom", "Add Custom", "", "9Add", None, "Add-Custom"])
def test_bad_op_type_name(name):
    with raises(ACL_ERROR_INVALID_PARAM):
        OpDef(name)


def test_duplicate_parameter_names_are_refused():
    op = OpDef("DupCustom")
    op.input("x")
    with raises(ACL_ERROR_INVALID_PARAM, "'x'"):
        op.output("x")
    with raises(ACL_ERROR_INVALID_PARAM, "'x'"):
        op.attr("x")


def test_duplicate_registration_and_builtin_names():
    definition = custom.register_op(add_op())
    assert definition.name == "AddCustom" and REGISTRY["AddCustom"] is definition
    with raises(ACL_ERROR_KERNEL_ALREADY_REGISTERED, "AddCustom"):
        custom.register_op(add_op())
    with raises(ACL_ERROR_KERNEL_ALREADY_REGISTERED, "Add"):
        custom.register_op(add_op("Add"))
    assert REGISTRY["Add"].ir is None  # the built-in is untouched
    custom.unregister_op("AddCustom")
    custom.register_op(add_op())  # free again after unregistering


def test_unregister_builtin_and_unknown():
    with raises(ACL_ERROR_INVALID_PARAM, "'Add'", "built-in"):
        custom.unregister_op("Add")
    assert "Add" in REGISTRY
    with raises(ACL_ERROR_OP_NOT_FOUND, "NoSuchCustom"):
        custom.unregister_op("NoSuchCustom")


def test_unregistered_op_disappears_from_every_face(threaded_runtime):
    custom.register_op(add_op())
    assert callable(aclnn.add_custom_get_workspace_size)
    custom.unregister_op("AddCustom")
    with pytest.raises(AttributeError):
        aclnn.add_custom_get_workspace_size  # noqa: B018
    with pytest.raises(AttributeError):
        c.aclnnAddCustomGetWorkspaceSize  # noqa: B018
    with pytest.raises(AttributeError):
        openacl.ops.add_custom  # noqa: B018
    first = custom.register_op(add_op())  # registered again: new faces for the new definition
    phase1, c_phase1, helper = (aclnn.add_custom_get_workspace_size,
                                c.aclnnAddCustomGetWorkspaceSize, openacl.ops.add_custom)
    assert aclnn.add_custom_get_workspace_size is phase1  # built once per definition
    custom.unregister_op("AddCustom")
    custom.register_op(add_op())
    assert REGISTRY["AddCustom"] is not first
    assert aclnn.add_custom_get_workspace_size is not phase1
    assert c.aclnnAddCustomGetWorkspaceSize is not c_phase1
    assert openacl.ops.add_custom is not helper
    custom.unregister_op("AddCustom")
    with raises(ACL_ERROR_OP_NOT_FOUND, "AddCustom"):
        aclop.execute_v2("AddCustom", [], [], [], [], None, 0)


# -- the generated APIs -------------------------------------------------------------------------
def test_pythonic_two_phase(runtime):
    custom.register_op(add_op())
    x, y = data((8, 64), np.float16, 1), data((8, 64), np.float16, 2)
    z = openacl.empty((8, 64), np.float16)
    assert two_phase("add_custom", dev(x), dev(y), z) == 0
    np.testing.assert_array_equal(z.numpy(), x + y)
    assert aclnn.add_custom.__name__ == "add_custom"


def test_pythonic_phase2_on_a_stream_is_asynchronous(threaded_runtime, gate):
    custom.register_op(add_op())
    x = data((4, 16))
    z = openacl.empty((4, 16), np.float32)
    openacl.rt.memset(z.data_ptr, z.nbytes, 0, z.nbytes)
    stream = openacl.Stream()
    stream.launch_host_func(gate.task)
    xd = dev(x)  # device memory must outlive the queued launch
    size, executor = aclnn.add_custom_get_workspace_size(xd, xd, z)
    aclnn.add_custom(0, size, executor, stream)
    assert gate.entered.wait(5)
    assert not stream.done()
    gate.open()
    stream.synchronize()
    np.testing.assert_array_equal(z.numpy(), 2 * x)


def test_compat_two_phase_returns_codes(threaded_runtime):
    custom.register_op(add_op())
    x = data((3, 5))
    xd, z = dev(x), openacl.empty((3, 5), np.float32)
    size, executor, ret = c.aclnnAddCustomGetWorkspaceSize(xd, xd, z)
    assert (size, ret) == (0, ACL_SUCCESS) and executor != 0
    assert c.aclnnAddCustom(0, size, executor, 0) == ACL_SUCCESS
    assert openacl.rt.synchronize_stream(0) is None
    np.testing.assert_array_equal(z.numpy(), 2 * x)
    bad = openacl.empty((3, 5), np.float16)
    assert c.aclnnAddCustomGetWorkspaceSize(xd, xd, bad) == (0, 0, ACLNN_ERR_PARAM_INVALID)
    assert "'z'" in openacl.get_recent_err_msg()


def test_one_shot_helper(runtime):
    custom.register_op(add_op())
    x, y = data((5, 7), seed=3), data((5, 7), seed=4)
    result = openacl.ops.add_custom(dev(x), dev(y))
    assert result.shape == (5, 7) and result.dtype == np.float32
    np.testing.assert_array_equal(result.numpy(), x + y)
    np.testing.assert_array_equal(openacl.ops.add_custom(x, y).numpy(), x + y)  # host arrays


def test_execute_v2_by_name(runtime):
    custom.register_op(add_op())
    x, y = data((8, 32), np.float16, 5), data((8, 32), np.float16, 6)
    xd, yd, z = dev(x), dev(y), openacl.empty((8, 32), np.float16)
    desc = create_tensor_desc(F16, [8, 32], ND)
    buffers = [create_data_buffer(t.data_ptr, t.nbytes) for t in (xd, yd, z)]
    aclop.execute_v2("AddCustom", [desc, desc], buffers[:2], [desc], buffers[2:], None, 0)
    openacl.rt.synchronize_stream(0)
    np.testing.assert_array_equal(z.numpy(), x + y)


def scale_op(name: str = "ScaleCustom") -> OpDef:
    """out = (x [+ bias]) * alpha + beta; alpha REQUIRED, beta OPTIONAL (default 0.5)."""
    def kernel(x, bias, out, workspace, tiling) -> None:
        start, stop = span(out.size)
        alpha, beta = kernel.attrs["alpha"], kernel.attrs["beta"]
        value = x.reshape(-1)[start:stop] + (0 if bias is None else bias.reshape(-1)[start:stop])
        out.reshape(-1)[start:stop] = value * alpha + beta

    def tiling(ctx) -> None:
        kernel.attrs = dict(ctx.attrs)
        ctx.set_block_dim(3)

    op = OpDef(name)
    op.input("x").param_type(REQUIRED).data_type([F32])
    op.input("bias").param_type(OPTIONAL).data_type([F32])
    op.attr("alpha").attr_type(REQUIRED).float()
    op.attr("beta").attr_type(OPTIONAL).float(0.5)
    op.output("out").param_type(REQUIRED).data_type([F32])
    return op.set_tiling(tiling).set_kernel(kernel)


def test_argument_order_is_inputs_attrs_outputs(threaded_runtime):
    custom.register_op(scale_op())
    expected = ["x", "bias", "alpha", "beta", "out"]
    assert list(inspect.signature(aclnn.scale_custom_get_workspace_size).parameters) == expected
    x, bias = data((4, 9), seed=7), data((4, 9), seed=8)
    out = openacl.empty((4, 9), np.float32)
    xd, bd = dev(x), dev(bias)
    size, executor, ret = c.aclnnScaleCustomGetWorkspaceSize(xd, bd, 2.0, 1.0, out)
    assert ret == ACL_SUCCESS
    assert c.aclnnScaleCustom(0, size, executor, 0) == ACL_SUCCESS
    np.testing.assert_allclose(out.numpy(), (x + bias) * 2.0 + 1.0, rtol=1e-6)


def test_attr_defaults_required_attrs_and_optional_inputs(runtime):
    custom.register_op(scale_op())
    x = data((6, 5), seed=9)
    out = openacl.empty((6, 5), np.float32)
    two_phase("scale_custom", dev(x), None, 3.0, None, out)  # bias absent, beta default
    np.testing.assert_allclose(out.numpy(), x * 3.0 + 0.5, rtol=1e-6)
    with raises(ACLNN_ERR_PARAM_INVALID, "'alpha'"):
        aclnn.scale_custom_get_workspace_size(dev(x), None, None, 1.0, out)


def test_one_shot_with_optional_input_and_attrs(threaded_runtime):
    op = scale_op()
    op.attrs[0].attr_type(OPTIONAL).float(2.0)  # every attr has a default: a legal signature
    custom.register_op(op)
    x, bias = data((2, 3), seed=10), data((2, 3), seed=11)
    np.testing.assert_allclose(openacl.ops.scale_custom(dev(x)).numpy(), x * 2 + 0.5,
                               rtol=1e-6)
    np.testing.assert_allclose(openacl.ops.scale_custom(dev(x), dev(bias), beta=0.0).numpy(),
                               (x + bias) * 2, rtol=1e-6)


def test_one_shot_with_required_attr_after_optional_input(threaded_runtime):
    """BUG: python_signature(with_defaults=True) gives 'bias' a default and not the REQUIRED
    'alpha' after it, so openacl.ops.scale_custom raises ValueError from inspect."""
    custom.register_op(scale_op())
    x = data((2, 3), seed=12)
    result = openacl.ops.scale_custom(dev(x), alpha=4.0)
    np.testing.assert_allclose(result.numpy(), x * 4 + 0.5, rtol=1e-6)


def test_execute_v2_with_attrs_and_a_missing_optional_input(threaded_runtime):
    custom.register_op(scale_op())
    x = data((3, 4), seed=13)
    xd, out = dev(x), openacl.empty((3, 4), np.float32)
    desc = create_tensor_desc(F32, [3, 4], ND)
    attr = aclop.create_attr()
    aclop.set_attr_float(attr, "alpha", 5.0)
    aclop.execute_v2("ScaleCustom", [desc], [create_data_buffer(xd.data_ptr, xd.nbytes)],
                     [desc], [create_data_buffer(out.data_ptr, out.nbytes)], attr, 0)
    openacl.rt.synchronize_stream(0)
    np.testing.assert_allclose(out.numpy(), x * 5 + 0.5, rtol=1e-6)


def sum_list_op(name: str = "SumListCustom", infer: bool = True) -> OpDef:
    """y = sum of the tensors of the DYNAMIC input xs, times scale."""
    def kernel(xs, y, workspace, tiling) -> None:
        start, stop = span(y.size)
        y.reshape(-1)[start:stop] = sum(x.reshape(-1)[start:stop] for x in xs) * kernel.scale

    def tiling(ctx) -> None:
        kernel.scale = ctx.get_attr("scale")
        ctx.set_block_dim(2)

    op = OpDef(name)
    op.input("xs").param_type(DYNAMIC).data_type([F32])
    op.attr("scale").attr_type(OPTIONAL).float(1.0)
    op.output("y").param_type(REQUIRED).data_type([F32])
    if infer:
        op.set_infer_shape(lambda ctx: ctx.set_output_shape(0, ctx.get_input_shape(0)[0]))
    return op.set_tiling(tiling).set_kernel(kernel)


def test_dynamic_input_tensor_list(runtime):
    custom.register_op(sum_list_op())
    parts = [data((3, 4), seed=s) for s in range(3)]
    y = openacl.empty((3, 4), np.float32)
    two_phase("sum_list_custom", [dev(p) for p in parts], 2.0, y)
    np.testing.assert_allclose(y.numpy(), sum(parts) * 2, rtol=1e-6)
    handles = [dev(p) for p in parts[:2]]
    tensor_list = create_tensor_list([t.handle for t in handles])
    size, executor, ret = c.aclnnSumListCustomGetWorkspaceSize(tensor_list, 1.0, y)
    assert ret == ACL_SUCCESS
    assert c.aclnnSumListCustom(0, size, executor, 0) == ACL_SUCCESS
    openacl.rt.synchronize_stream(0)
    np.testing.assert_allclose(y.numpy(), parts[0] + parts[1], rtol=1e-6)


def test_dynamic_input_without_infer_shape(threaded_runtime):
    """BUG: with no infer_shape and a DYNAMIC first input, the default output shape is the
    list of the list's shapes (register.py: first_shape), so phase 1 fails with 561000."""
    custom.register_op(sum_list_op(infer=False))
    parts = [data((2, 2), seed=s) for s in range(2)]
    y = openacl.empty((2, 2), np.float32)
    two_phase("sum_list_custom", [dev(p) for p in parts], 1.0, y)
    np.testing.assert_allclose(y.numpy(), parts[0] + parts[1], rtol=1e-6)


# -- dtype and format columns ---------------------------------------------------------------
def mixed_op() -> OpDef:
    """Columns: (f16, f16 -> f16), (f32, i32 -> f32); x is NCHW-or-ND per column."""
    op = OpDef("MixedCustom")
    op.input("x").data_type([F16, F32]).format([ND, NCHW])
    op.input("y").data_type([F16, I32]).format([ND, ND])
    op.output("z").data_type([F16, F32]).format([ND, ND])

    def kernel(x, y, z, workspace, tiling) -> None:
        z[...] = x + y.astype(z.dtype)
    return op.set_tiling(one_block).set_kernel(kernel)


def test_declared_columns_are_accepted(runtime):
    custom.register_op(mixed_op())
    x16, y16 = data((2, 3), np.float16), data((2, 3), np.float16, 1)
    z = openacl.empty((2, 3), np.float16)
    two_phase("mixed_custom", dev(x16), dev(y16), z)
    np.testing.assert_array_equal(z.numpy(), x16 + y16)
    x32, y32 = data((1, 2, 2, 3)), np.arange(12, dtype=np.int32).reshape(1, 2, 2, 3)
    z = openacl.empty((1, 2, 2, 3), np.float32)
    two_phase("mixed_custom", openacl.to_device(x32, format=NCHW), dev(y32), z)
    np.testing.assert_array_equal(z.numpy(), x32 + y32.astype(np.float32))


def test_nd_column_accepts_plain_layouts(threaded_runtime):
    custom.register_op(mixed_op())
    x16 = data((1, 1, 2, 2), np.float16)
    z = openacl.empty((1, 1, 2, 2), np.float16)
    two_phase("mixed_custom", openacl.to_device(x16, format=NCHW), dev(x16), z)
    np.testing.assert_array_equal(z.numpy(), 2 * x16)


def test_undeclared_combination_names_the_inputs(threaded_runtime):
    custom.register_op(mixed_op())
    z16, z32 = openacl.empty((2, 3), np.float16), openacl.empty((2, 3), np.float32)
    with raises(ACLNN_ERR_PARAM_INVALID, "'x'", "ACL_FLOAT16", "ACL_FLOAT"):
        aclnn.mixed_custom_get_workspace_size(dev(data((2, 3), np.float16)),
                                              dev(data((2, 3))), z16)
    with raises(ACLNN_ERR_PARAM_INVALID, "'y'"):  # y's dtype is the one that is wrong
        aclnn.mixed_custom_get_workspace_size(dev(data((2, 3))), dev(data((2, 3))), z32)
    # the f32 column wants x in NCHW, so an ND x has no column
    with raises(ACLNN_ERR_PARAM_INVALID):
        aclnn.mixed_custom_get_workspace_size(dev(data((2, 3))),
                                              dev(np.zeros((2, 3), np.int32)), z32)


def test_output_dtype_must_equal_the_column(threaded_runtime):
    custom.register_op(add_op())
    x = dev(data((2, 3), np.float16))
    for wrong in (np.float32, np.float64, np.int32):
        with raises(ACLNN_ERR_PARAM_INVALID, "'z'", "dtype"):
            aclnn.add_custom_get_workspace_size(x, x, openacl.empty((2, 3), wrong))


def reduce_op() -> OpDef:
    """y[i] = sum over the last axis of x; infer_shape drops the last axis."""
    def infer(ctx) -> None:
        ctx.set_output_shape(0, ctx.get_input_shape(0)[:-1])

    def tiling(ctx) -> None:
        ctx.set_block_dim(min(4, ctx.output_shapes[0][0]))

    def kernel(x, y, workspace, tiling) -> None:
        start, stop = span(y.shape[0])
        y[start:stop] = x[start:stop].sum(axis=-1)

    op = OpDef("ReduceSumCustom")
    op.input("x").data_type([F32])
    op.output("y").data_type([F32])
    return op.set_infer_shape(infer).set_tiling(tiling).set_kernel(kernel)


def test_infer_shape_sets_output_shape_and_check_follows_it(runtime):
    custom.register_op(reduce_op())
    x = data((10, 6))
    y = openacl.empty((10,), np.float32)
    two_phase("reduce_sum_custom", dev(x), y)
    np.testing.assert_allclose(y.numpy(), x.sum(-1), rtol=1e-5)
    with raises(ACLNN_ERR_PARAM_INVALID, "'y'", "shape"):
        aclnn.reduce_sum_custom_get_workspace_size(dev(x), openacl.empty((10, 6), np.float32))
    assert openacl.ops.reduce_sum_custom(dev(x)).shape == (10,)


def test_infer_shape_may_set_output_dtype(threaded_runtime):
    op = reduce_op()
    op.set_infer_shape(lambda ctx: (ctx.set_output_shape(0, ctx.get_input_shape(0)[:-1]),
                                    ctx.set_output_dtype(0, F16)))
    op.kernel = lambda x, y, w, t: y.__setitem__(Ellipsis, x.sum(-1))
    custom.register_op(op)
    x = data((3, 2))
    with raises(ACLNN_ERR_PARAM_INVALID, "'y'"):
        aclnn.reduce_sum_custom_get_workspace_size(dev(x), openacl.empty((3,), np.float32))
    y = openacl.empty((3,), np.float16)
    two_phase("reduce_sum_custom", dev(x), y)
    np.testing.assert_allclose(y.numpy(), x.sum(-1).astype(np.float16), rtol=1e-3)


# -- tiling -------------------------------------------------------------------------------------
@dataclass
class CoverTiling(TilingData):
    total_length: np.uint32 = 0
    tile_length: np.int64 = 0
    scale: np.float32 = 0.0
    flag: np.uint8 = 0


def cover_op(block_dim: int, hits: np.ndarray, lock: threading.Lock) -> OpDef:
    """y = x * scale over ceil-sized tiles; every element written counts a hit."""
    def tiling(ctx) -> None:
        n = int(np.prod(ctx.get_input_shape(0)))
        ctx.set_block_dim(block_dim)
        ctx.set_tiling_data(CoverTiling(n, -(-n // block_dim), 2.0, 1))

    def kernel(x, y, workspace, tiling) -> None:
        t = CoverTiling.from_buffer(tiling)
        index = custom.get_block_idx()
        start = min(t.total_length, index * t.tile_length)
        stop = min(t.total_length, start + t.tile_length)
        y.reshape(-1)[start:stop] = x.reshape(-1)[start:stop] * t.scale
        with lock:
            hits[start:stop] += 1

    op = OpDef("CoverCustom")
    op.input("x").data_type([F32])
    op.output("y").data_type([F32])
    return op.set_tiling(tiling).set_kernel(kernel)


@pytest.mark.parametrize(("n", "block_dim"), [(1000, 7), (1000, 1), (5, 16), (1, 3), (64, 8)])
def test_every_element_written_exactly_once(runtime, n, block_dim):
    hits, lock = np.zeros(n, np.int64), threading.Lock()
    custom.register_op(cover_op(block_dim, hits, lock))
    x = data((n,), seed=n)
    y = openacl.empty((n,), np.float32)
    two_phase("cover_custom", dev(x), y)
    np.testing.assert_array_equal(hits, np.ones(n))
    np.testing.assert_array_equal(y.numpy(), x * 2)


def test_tiling_data_round_trip():
    value = CoverTiling(total_length=1000, tile_length=-143, scale=0.25, flag=255)
    raw = value.to_bytes()
    assert len(raw) == 4 + 8 + 4 + 1  # packed, no padding, field order
    assert raw[:4] == (1000).to_bytes(4, "little")
    assert raw[4:12] == (-143).to_bytes(8, "little", signed=True)
    padded = np.frombuffer(raw + b"\x00" * 7, np.uint8)  # what a kernel receives
    assert CoverTiling.from_buffer(padded) == value
    assert isinstance(CoverTiling.from_buffer(padded).total_length, int)


def test_tiling_data_from_bytes():
    """BUG: from_buffer documents bytes but np.asarray(bytes, np.uint8) parses them as an
    int literal (tiling.py, from_buffer): ValueError."""
    value = CoverTiling(total_length=7, tile_length=1, scale=1.5, flag=0)
    assert CoverTiling.from_buffer(value.to_bytes()) == value
    assert CoverTiling.from_buffer(bytearray(value.to_bytes())) == value


def test_tiling_sees_shapes_dtypes_attrs_and_platform(threaded_runtime):
    seen = {}

    def tiling(ctx) -> None:
        seen.update(shapes=ctx.input_shapes, dtypes=ctx.input_dtypes,
                    out_shapes=ctx.output_shapes, out_dtypes=ctx.output_dtypes,
                    attrs=dict(ctx.attrs), cores=ctx.get_platform_info().get_core_num(),
                    ub=ctx.get_platform_info().get_ub_size())
        ctx.set_block_dim(1)

    op = scale_op()
    op.set_tiling(tiling).set_kernel(lambda x, b, o, w, t: None)
    custom.register_op(op, platform=custom.PlatformInfo(core_num=24, ub_size=1 << 16))
    aclnn.scale_custom_get_workspace_size(dev(data((2, 5))), None, 1.5, None,
                                          openacl.empty((2, 5), np.float32))
    assert seen == {"shapes": [(2, 5), None], "dtypes": [np.dtype(np.float32), None],
                    "out_shapes": [(2, 5)], "out_dtypes": [np.dtype(np.float32)],
                    "attrs": {"alpha": 1.5, "beta": 0.5}, "cores": 24, "ub": 1 << 16}


def test_tiling_key_reaches_the_kernel(threaded_runtime):
    """BUG: TilingContext.tiling_key is never passed to the kernel (no TILING_KEY_IS
    counterpart); expected here as custom.get_tiling_key(), read like get_block_idx()."""
    keys = []

    def tiling(ctx) -> None:
        ctx.set_block_dim(2)
        ctx.set_tiling_key(7 if ctx.get_input_dtype(0) == np.float16 else 3)

    def kernel(x, y, z, workspace, tiling) -> None:
        keys.append(custom.get_tiling_key())

    op = add_op()
    op.set_tiling(tiling).set_kernel(kernel)
    custom.register_op(op)
    for dtype, key in ((np.float16, 7), (np.float32, 3)):
        keys.clear()
        x = dev(data((4,), dtype))
        two_phase("add_custom", x, x, openacl.empty((4,), dtype))
        assert keys == [key, key]


def workspace_op(sizes: list[int], seen: list) -> OpDef:
    """Each block writes its index into its own slice of the workspace, then copies x."""
    def tiling(ctx) -> None:
        ctx.set_block_dim(4)
        ctx.set_workspace_sizes(sizes)

    def kernel(x, y, workspace, tiling) -> None:
        index = custom.get_block_idx()
        seen.append((workspace.dtype, workspace.size))
        per_block = workspace.size // 4
        workspace[index * per_block:(index + 1) * per_block] = index + 1
        y[...] = x

    op = OpDef("WorkspaceCustom")
    op.input("x").data_type([F32])
    op.output("y").data_type([F32])
    return op.set_tiling(tiling).set_kernel(kernel)


def test_workspace_request_is_honoured(runtime):
    seen: list = []
    custom.register_op(workspace_op([64, 36], seen))
    x, y = dev(data((3,))), openacl.empty((3,), np.float32)
    size, executor = aclnn.workspace_custom_get_workspace_size(x, y)
    assert size == 100
    workspace = openacl.rt.malloc(size)
    aclnn.workspace_custom(workspace, size, executor, 0)
    openacl.rt.synchronize_stream(0)
    assert seen == [(np.dtype(np.uint8), 100)] * 4
    host = to_host(custom.global_buffer(workspace, np.uint8, size))
    np.testing.assert_array_equal(host, np.repeat(np.arange(1, 5), 25))


def test_workspace_smaller_than_asked_is_refused(threaded_runtime):
    custom.register_op(workspace_op([128], []))
    x, y = dev(data((3,))), openacl.empty((3,), np.float32)
    size, executor = aclnn.workspace_custom_get_workspace_size(x, y)
    assert size == 128
    with raises(ACLNN_ERR_PARAM_INVALID, "workspaceSize", "128"):
        aclnn.workspace_custom(openacl.rt.malloc(128), 127, executor, 0)
    size, executor, ret = c.aclnnWorkspaceCustomGetWorkspaceSize(x, y)
    assert c.aclnnWorkspaceCustom(openacl.rt.malloc(64), 64, executor, 0) == \
        ACLNN_ERR_PARAM_INVALID


def test_no_workspace_gives_an_empty_array(threaded_runtime):
    seen: list = []
    custom.register_op(workspace_op([], seen))
    assert two_phase("workspace_custom", dev(data((3,))), openacl.empty((3,), np.float32)) == 0
    assert [size for _, size in seen] == [0] * 4


@pytest.mark.parametrize(("block_dim", "sizes"), [(0, []), (-2, []), ("4", []), (2.5, []),
                                                  (1, [16, -1])])
def test_tiling_errors(threaded_runtime, block_dim, sizes):
    def tiling(ctx) -> None:
        ctx.set_block_dim(block_dim)
        ctx.set_workspace_sizes(sizes)

    op = add_op()
    op.set_tiling(tiling)
    custom.register_op(op)
    x = dev(data((4,)))
    with raises(ACLNN_ERR_INNER_TILING_ERROR, "AddCustom"):
        aclnn.add_custom_get_workspace_size(x, x, openacl.empty((4,), np.float32))
    assert c.aclnnAddCustomGetWorkspaceSize(x, x, openacl.empty((4,), np.float32))[2] == \
        ACLNN_ERR_INNER_TILING_ERROR


# -- blocks -------------------------------------------------------------------------------------
def test_block_idx_and_num(runtime):
    seen, lock = set(), threading.Lock()

    def kernel(x, y, z, workspace, tiling) -> None:
        with lock:
            seen.add((custom.get_block_idx(), custom.get_block_num()))

    custom.register_op(add_op(block_dim=5, kernel=kernel))
    x = dev(data((3,)))
    two_phase("add_custom", x, x, openacl.empty((3,), np.float32))
    assert seen == {(i, 5) for i in range(5)}
    assert (custom.get_block_idx(), custom.get_block_num()) == (0, 1)  # outside a kernel


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs at least two CPU cores")
def test_blocks_run_in_parallel_threads(threaded_runtime):
    block_dim = min(4, os.cpu_count())
    barrier = threading.Barrier(block_dim, timeout=BARRIER_TIMEOUT_S)
    idents, lock = set(), threading.Lock()

    def kernel(x, y, z, workspace, tiling) -> None:
        barrier.wait()  # every block alive at once, or BrokenBarrierError
        with lock:
            idents.add(threading.get_ident())

    custom.register_op(add_op(block_dim=block_dim, kernel=kernel))
    x = dev(data((8,)))
    two_phase("add_custom", x, x, openacl.empty((8,), np.float32))
    assert len(idents) == block_dim


def test_failing_block_fails_the_stream(runtime):
    def kernel(x, y, z, workspace, tiling) -> None:
        if custom.get_block_idx() in (2, 3, 5):
            raise ValueError(f"bad tile {custom.get_block_idx()}")
        add_kernel(x, y, z, workspace, tiling)

    custom.register_op(add_op("FailCustom", block_dim=6, kernel=kernel))
    x = dev(data((12,)))
    stream, other = openacl.Stream(), openacl.Stream()
    z = openacl.empty((12,), np.float32)
    size, executor = aclnn.fail_custom_get_workspace_size(x, x, z)
    with raises(ACL_ERROR_RT_AICORE_EXCEPTION, "FailCustom", "block 2/6", "ValueError",
                "bad tile 2", "2 more block(s) failed"):
        aclnn.fail_custom(0, size, executor, stream)
        stream.synchronize()
    # another stream is unaffected
    z = openacl.empty((12,), np.float32)
    custom.register_op(add_op())
    size, executor = aclnn.add_custom_get_workspace_size(x, x, z)
    aclnn.add_custom(0, size, executor, other)
    other.synchronize()
    np.testing.assert_array_equal(z.numpy(stream=other), 2 * x.numpy(stream=other))


def test_one_failing_block_has_no_count_suffix(threaded_runtime):
    def kernel(x, y, z, workspace, tiling) -> None:
        if custom.get_block_idx() == 1:
            raise KeyError("only me")

    custom.register_op(add_op(block_dim=3, kernel=kernel))
    x = dev(data((3,)))
    with raises(ACL_ERROR_RT_AICORE_EXCEPTION, "block 1/3", "only me") as info:
        two_phase("add_custom", x, x, openacl.empty((3,), np.float32))
    assert "more block" not in str(info.value)


def test_failing_block_of_a_custom_op_shows_its_file_and_line(threaded_runtime):
    raise_line = inspect.currentframe().f_lineno + 4

    def kernel(x, y, z, workspace, tiling) -> None:
        if custom.get_block_idx() == 3:
            raise ArithmeticError("tile 3 overflows")
        add_kernel(x, y, z, workspace, tiling)

    custom.register_op(add_op("TracedCustom", block_dim=5, kernel=kernel))
    x = dev(data((10,)))
    with raises(ACL_ERROR_RT_AICORE_EXCEPTION, "TracedCustom block 3/5",
                "ArithmeticError: tile 3 overflows", "traceback of block 3",
                f'File "{__file__}", line {raise_line}, in kernel',
                'raise ArithmeticError("tile 3 overflows")') as info:
        two_phase("traced_custom", x, x, openacl.empty((10,), np.float32))
    assert "register.py" not in str(info.value) and "blocks.py" not in str(info.value)


# -- non-contiguous views -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["step", "transpose"])
def test_non_contiguous_inputs_and_outputs(runtime, kind):
    seen = []

    def kernel(x, y, z, workspace, tiling) -> None:
        seen.append((x.flags.c_contiguous, z.flags.c_contiguous))
        add_kernel(x, y, z, workspace, tiling)

    custom.register_op(add_op(block_dim=3, kernel=kernel))
    x, y = data((6, 5), seed=20), data((6, 5), seed=21)
    z = strided(np.zeros((6, 5), np.float32), kind)
    two_phase("add_custom", strided(x, kind), dev(y), z)
    np.testing.assert_array_equal(z.numpy(), x + y)
    assert seen == [(True, True)] * 3  # the kernel always sees contiguous global tensors
    if kind == "step":  # the gaps between the output's elements are left alone
        base = z._keepalive.numpy().reshape(-1)
        np.testing.assert_array_equal(base[3:].reshape(6, 10)[:, 1::2], 0)


# -- packages -----------------------------------------------------------------------------------
PACKAGE_SOURCE = '''
import numpy as np
import openacl
from openacl import custom

def _tiling(ctx):
    ctx.set_block_dim(2)

def _kernel(x, y, workspace, tiling):
    per = -(-y.size // custom.get_block_num())
    start = custom.get_block_idx() * per
    y.reshape(-1)[start:start + per] = x.reshape(-1)[start:start + per] + {add}

op = custom.OpDef("{name}")
op.input("x").data_type([openacl.ACL_FLOAT])
op.output("y").data_type([openacl.ACL_FLOAT])
op.set_tiling(_tiling).set_kernel(_kernel)
custom.register_op(op)
'''


def write_package(directory, name: str, add: int = 1) -> None:
    directory.mkdir(parents=True)
    (directory / "__init__.py").write_text(PACKAGE_SOURCE.format(name=name, add=add))


def check_plus(snake: str, add: int) -> None:
    x = data((3, 3))
    np.testing.assert_array_equal(getattr(openacl.ops, snake)(dev(x)).numpy(), x + add)


def test_load_package_from_module_file(threaded_runtime, tmp_path):
    module = tmp_path / "plus_ops.py"
    module.write_text(PACKAGE_SOURCE.format(name="PlusOneCustom", add=1))
    assert custom.load_package(module) == ["PlusOneCustom"]
    check_plus("plus_one_custom", 1)


def test_load_package_from_directory(threaded_runtime, tmp_path):
    write_package(tmp_path / "plus_pkg", "PlusTwoCustom", 2)
    assert custom.load_package(str(tmp_path / "plus_pkg")) == ["PlusTwoCustom"]
    check_plus("plus_two_custom", 2)


def test_package_that_raises_on_import(tmp_path):
    module = tmp_path / "broken_ops.py"
    module.write_text("raise RuntimeError('no such toolkit')\n")
    with raises(ACL_ERROR_OP_LOAD_FAILED, "broken_ops.py", "RuntimeError", "no such toolkit"):
        custom.load_package(module)
    broken = tmp_path / "broken_pkg"
    broken.mkdir()
    (broken / "__init__.py").write_text("import not_a_module_anywhere_xyz\n")
    with raises(ACL_ERROR_OP_LOAD_FAILED, "ModuleNotFoundError"):
        custom.load_package(broken)


def test_package_registering_a_taken_name_keeps_its_code(tmp_path):
    module = tmp_path / "dup_ops.py"
    module.write_text(PACKAGE_SOURCE.format(name="Add", add=0))
    with raises(ACL_ERROR_KERNEL_ALREADY_REGISTERED, "Add"):
        custom.load_package(module)


def test_load_package_on_a_path_that_is_neither(tmp_path):
    (tmp_path / "not_a_package").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    for path in (tmp_path / "missing.py", tmp_path / "not_a_package", tmp_path / "missing"):
        with raises(ACL_ERROR_INVALID_FILE, str(path)):
            custom.load_package(path)


def test_load_vendors_tree(threaded_runtime, tmp_path):
    write_package(tmp_path / "opp" / "vendors" / "acme", "AcmePlusCustom", 3)
    write_package(tmp_path / "opp" / "vendors" / "beta", "BetaPlusCustom", 4)
    (tmp_path / "opp" / "vendors" / "empty_dir").mkdir()
    assert sorted(custom.load_vendors(tmp_path / "opp")) == ["AcmePlusCustom", "BetaPlusCustom"]
    check_plus("acme_plus_custom", 3)
    check_plus("beta_plus_custom", 4)


def test_load_vendors_from_environment(threaded_runtime, tmp_path, monkeypatch):
    write_package(tmp_path / "one" / "vendors" / "acme", "EnvOneCustom", 5)
    write_package(tmp_path / "two" / "vendors" / "acme", "EnvTwoCustom", 6)
    monkeypatch.delenv("ASCEND_CUSTOM_OPP_PATH", raising=False)
    monkeypatch.setenv("OPENACL_CUSTOM_OPP_PATH",
                       os.pathsep.join([str(tmp_path / "one"), str(tmp_path / "nowhere"),
                                        str(tmp_path / "two")]))
    assert sorted(custom.load_vendors()) == ["EnvOneCustom", "EnvTwoCustom"]
    check_plus("env_one_custom", 5)
    check_plus("env_two_custom", 6)


def test_load_vendors_with_nothing_configured(monkeypatch, tmp_path):
    for variable in ("OPENACL_CUSTOM_OPP_PATH", "ASCEND_CUSTOM_OPP_PATH"):
        monkeypatch.delenv(variable, raising=False)
    assert custom.load_vendors() == []
    assert custom.load_vendors(tmp_path / "missing") == []


def test_load_entry_points_of_an_empty_group():
    assert custom.load_entry_points("openacl.test_no_such_group") == []

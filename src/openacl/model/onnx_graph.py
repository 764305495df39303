"""ONNX graph plumbing shared by import, folding and the staged engine: what a node reads
(its inputs plus the outer-scope names its subgraphs use), stable node names, inlining the
branch of an ``If`` whose condition is known, and upgrading old opsets.

Everything here works on ``onnx`` protos (imported lazily by the callers: ``onnx`` is heavy)
and changes only the protos it is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from openacl.errors import ACL_ERROR_INVALID_PARAM, ACL_ERROR_PARSE_MODEL, AclError

__all__ = [
    "MIN_OPSET",
    "check_nodes",
    "constants_to_initializers",
    "default_opset",
    "default_opset_of",
    "free_names",
    "infer_shapes",
    "inline_branch",
    "name_nodes",
    "node_reads",
    "select_outputs",
    "subgraphs",
    "upgrade_opset",
]

MIN_OPSET = 11  # older default-domain opsets are upgraded to this one at import
NAMES_SHOWN = 12  # node or value names an error message lists before "..."
DEFAULT_DOMAINS = ("", "ai.onnx")


def default_opset(proto: Any) -> int:
    """The model's default-domain (ai.onnx) opset version, 0 when it declares none."""
    return default_opset_of(proto.opset_import)


def default_opset_of(opsets: Any) -> int:
    """The default-domain version among OperatorSetIdProtos (0 when none is)."""
    return next((o.version for o in opsets if o.domain in DEFAULT_DOMAINS), 0)


def subgraphs(node: Any) -> Iterator[Any]:
    """The GraphProtos held by ``node``'s attributes (If branches, Loop and Scan bodies)."""
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def free_names(graph: Any) -> set[str]:
    """The names ``graph`` (a subgraph) reads from its enclosing scopes: used by its nodes
    (or theirs, recursively) and defined by none of its inputs, initializers or nodes."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    used: set[str] = set()
    for node in graph.node:
        used.update(name for name in node_reads(node) if name not in defined)
        defined.update(node.output)
    used.update(v.name for v in graph.output if v.name not in defined)
    return used


def node_reads(node: Any) -> list[str]:
    """Every value ``node`` needs before it runs: its inputs, then the outer-scope names its
    subgraphs use (in a stable order, without repeats or the empty name)."""
    names = [name for name in node.input if name]
    seen = set(names)
    for graph in subgraphs(node):
        for name in sorted(free_names(graph)):
            if name not in seen:
                seen.add(name)
                names.append(name)
    return names


def name_nodes(graph: Any) -> None:
    """Give every unnamed node of ``graph`` the name the importer reports it by
    (``<OpType>_<index>``), so a node keeps its name when the graph is cut into stages."""
    taken = {node.name for node in graph.node if node.name}
    for index, node in enumerate(graph.node):
        if not node.name:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)


def _renamed(graph: Any, mapping: dict[str, str]) -> None:
    """Rename, in place, every use of ``mapping``'s names in ``graph`` and its subgraphs,
    except where a subgraph defines a name of its own (which shadows the outer one)."""
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in mapping:
                node.input[index] = mapping[name]
        for index, name in enumerate(node.output):
            if name in mapping:
                node.output[index] = mapping[name]
        for sub in subgraphs(node):
            local = {v.name for v in sub.input} | {t.name for t in sub.initializer} | {
                out for n in sub.node for out in n.output}
            _renamed(sub, {k: v for k, v in mapping.items() if k not in local})
    for value in graph.output:
        if value.name in mapping:
            value.name = mapping[value.name]


def inline_branch(node: Any, condition: bool, taken: set[str]) -> tuple[list[Any], list[Any]]:
    """The nodes and initializers that replace ``If`` node ``node`` once its condition is
    known: the chosen branch's nodes with every value the branch defines renamed under the
    node's name (names stay unique in the graph, ``taken`` is updated), then one Identity
    per output from the branch's result to the If's output name."""
    import onnx
    from onnx import helper

    branch_name = "then_branch" if condition else "else_branch"
    branch = next((a.g for a in node.attribute if a.name == branch_name), None)
    if branch is None:
        raise AclError(ACL_ERROR_PARSE_MODEL, f"node {node.name!r} (If) has no {branch_name}")
    body = onnx.GraphProto()
    body.CopyFrom(branch)
    defined = [t.name for t in body.initializer] + [
        out for n in body.node for out in n.output if out]
    mapping = {}
    for name in defined:
        fresh = f"{node.name}/{name}"
        while fresh in taken:
            fresh += "_"
        taken.add(fresh)
        mapping[name] = fresh
    _renamed(body, mapping)
    for tensor in body.initializer:
        tensor.name = mapping[tensor.name]
    for index, inner in enumerate(body.node):
        inner.name = f"{node.name}/{inner.name or f'{inner.op_type}_{index}'}"
    nodes = list(body.node)
    for result, output in zip(body.output, node.output, strict=False):
        if output:
            nodes.append(helper.make_node("Identity", [result.name], [output],
                                          name=f"{node.name}/{output}"))
    return nodes, list(body.initializer)


def check_nodes(graph: Any, opset: int) -> None:
    """Every default-domain node of ``graph`` (and of its subgraphs) has the inputs and
    outputs its schema at ``opset`` demands: a count in [min, max] and no required input
    left empty. Unknown ops pass (their runner names them).

    Raises:
        AclError: ACL_ERROR_PARSE_MODEL naming the node and what is wrong.
    """
    from onnx import AttributeProto, defs

    single = defs.OpSchema.FormalParameterOption.Single
    for node in graph.node:
        for sub in subgraphs(node):
            check_nodes(sub, opset)
        if node.domain not in DEFAULT_DOMAINS:
            continue
        try:
            schema = defs.get_schema(node.op_type, opset, "")
        except defs.SchemaError:
            continue
        where = f"node {node.name!r} ({node.op_type})"
        if not schema.min_input <= len(node.input) <= schema.max_input or \
                not schema.min_output <= len(node.output) <= schema.max_output:
            raise AclError(ACL_ERROR_PARSE_MODEL,
                           f"{where} has {len(node.input)} input(s) and {len(node.output)} "
                           f"output(s); its opset-{opset} schema takes {schema.min_input}-"
                           f"{schema.max_input} and {schema.min_output}-{schema.max_output}")
        for formal, name in zip(schema.inputs, node.input, strict=False):
            if formal.option == single and not name:
                raise AclError(ACL_ERROR_PARSE_MODEL,
                               f"{where} leaves its required input {formal.name!r} empty")
        for attr in node.attribute:
            declared = schema.attributes.get(attr.name)
            if declared is not None and attr.type != int(declared.type):
                kinds = AttributeProto.AttributeType
                given = kinds.Name(attr.type) if attr.type in kinds.values() else attr.type
                raise AclError(ACL_ERROR_PARSE_MODEL,
                               f"{where}: attribute {attr.name!r} is {given}; its schema "
                               f"says {kinds.Name(int(declared.type))}")


def infer_shapes(model: Any) -> Any:
    """ONNX shape inference (lenient, with data propagation) of ``model``; a model it finds
    inconsistent (it raises even when not strict) is ACL_ERROR_PARSE_MODEL naming why."""
    from onnx import shape_inference

    try:
        return shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:  # InferenceError, ValidationError, C++ errors as RuntimeError
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"the model is inconsistent (ONNX shape inference: {exc})") from exc


def constants_to_initializers(graph: Any) -> None:
    """Replace, in place, the default-domain ``Constant`` nodes of ``graph`` by
    initializers of the same name (any of Constant's value attributes)."""
    from onnx import numpy_helper

    from openacl.model.onnx_import import _attribute, _constant_value

    kept = []
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in DEFAULT_DOMAINS and node.output:
            attrs = {a.name: _attribute(a) for a in node.attribute}
            graph.initializer.append(numpy_helper.from_array(
                _constant_value(node.name, attrs), node.output[0]))
        else:
            kept.append(node)
    if len(kept) != len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)


def upgrade_opset(proto: Any) -> tuple[Any, int]:
    """``proto`` itself when its default-domain opset is ``MIN_OPSET`` or newer, else a copy
    upgraded to ``MIN_OPSET`` by ``onnx.version_converter``; returns (model, original opset).

    Raises:
        AclError: ACL_ERROR_PARSE_MODEL naming the opset when the converter cannot upgrade it.
    """
    from onnx import version_converter

    opset = default_opset(proto)
    if opset >= MIN_OPSET or opset == 0:
        return proto, opset
    try:
        upgraded = version_converter.convert_version(proto, MIN_OPSET)
    except Exception as exc:  # the converter raises RuntimeError/ValueError/C++ errors
        raise AclError(ACL_ERROR_PARSE_MODEL,
                       f"ONNX opset {opset} could not be upgraded to {MIN_OPSET} by "
                       f"onnx.version_converter: {exc}") from exc
    return upgraded, opset


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (", ..." if len(names) > NAMES_SHOWN else "") if names else "none"


def select_outputs(proto: Any, out_nodes: Any) -> Any:
    """Make ``out_nodes`` the graph's outputs, in place, as ATC's --out_nodes does: each entry
    is ``node_name:index`` (output ``index`` of that node; an unnamed node is called
    ``<OpType>_<index>``, as the importer reports it) or the name of a value (a graph output
    or any node's output, ATC's ONNX form). Nodes the new outputs do not need are dropped;
    the inputs stay. Returns ``proto``.

    Raises:
        AclError: ACL_ERROR_INVALID_PARAM naming an entry that is no node output or value,
            an index out of range, a repeated output, or a value whose type is unknown.
    """
    from onnx import helper

    from openacl.model.onnx_import import shape_inference_view

    graph = proto.graph
    name_nodes(graph)
    nodes = {node.name: node for node in graph.node}
    produced = {out for node in graph.node for out in node.output if out}
    values = produced | {v.name for v in graph.input}
    chosen: list[str] = []
    for entry in out_nodes:
        node_name, colon, index = entry.rpartition(":")
        if colon and node_name in nodes and index.strip().isdigit():
            outputs = list(nodes[node_name].output)
            number = int(index)
            if number >= len(outputs) or not outputs[number]:
                raise AclError(ACL_ERROR_INVALID_PARAM,
                               f"argument 'out_nodes' entry {entry!r}: node {node_name!r} "
                               f"({nodes[node_name].op_type}) has outputs 0 to "
                               f"{len(outputs) - 1}")
            name = outputs[number]
        elif entry in values:
            name = entry
        else:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'out_nodes' entry {entry!r} is neither node_name:index "
                           f"nor a value of the graph (nodes: {_listed(list(nodes))}; graph "
                           f"outputs: {_listed([v.name for v in graph.output])})")
        if name in chosen:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'out_nodes' names the value {name!r} twice")
        chosen.append(name)
    if not chosen:
        raise AclError(ACL_ERROR_INVALID_PARAM, "argument 'out_nodes' names no output")
    types = {v.name: v.type for v in [*graph.input, *graph.value_info, *graph.output]
             if v.type.WhichOneof("value") == "tensor_type" and v.type.tensor_type.elem_type}
    if any(name not in types for name in chosen):
        inferred = infer_shapes(shape_inference_view(proto)).graph
        for value in [*inferred.value_info, *inferred.output, *inferred.input]:
            if value.type.WhichOneof("value") == "tensor_type" and \
                    value.type.tensor_type.elem_type:
                types.setdefault(value.name, value.type)
    outputs = []
    for name in chosen:
        if name not in types:
            raise AclError(ACL_ERROR_INVALID_PARAM,
                           f"argument 'out_nodes': the type of {name!r} cannot be inferred")
        old = next((v for v in graph.output if v.name == name), None)
        outputs.append(old if old is not None else helper.make_tensor_value_info(
            name, types[name].tensor_type.elem_type, None))
    needed = set(chosen)
    kept = []
    for node in reversed(graph.node):
        if any(out in needed for out in node.output):
            kept.append(node)
            needed.update(node_reads(node))
    kept.reverse()
    del graph.output[:]
    graph.output.extend(outputs)
    if len(kept) != len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)
    return proto

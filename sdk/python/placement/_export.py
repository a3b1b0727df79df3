"""How a model becomes the op program placementd runs: torch.export (the default) or a TorchScript
trace, the exported program's clean-up, and capture()."""

from __future__ import annotations

import collections
import contextlib
import inspect
import io
import json
import logging
import sys
import threading
import warnings
from typing import Any, Dict, Optional, Sequence, Union

import torch
from torch.utils import _pytree as pytree

from ._placement import CaptureError
from ._placement import Model as _Model
from ._placement import capture_json as _capture_json


def _script(model, example_inputs):
    """A ScriptModule for `model`: itself, or an nn.Module traced on the example inputs. Tracing
    keeps the module's own parameter tensors, so the optimizer, state_dict() and torch.save see
    what placementd moves."""
    if isinstance(model, torch.jit.ScriptModule):
        return model
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model is a {type(model).__name__}, not a torch.nn.Module or torch.jit.ScriptModule")
    try:
        return torch.jit.trace(model, tuple(example_inputs), check_trace=False)
    except Exception as e:
        raise CaptureError(f"cannot trace {type(model).__name__}: {e}") from e


_TENSOR = object()  # marks the flattened inputs that were tensors when the model was exported


class _Exported:
    """An nn.Module exported with torch.export (training IR, strict=False) and read into placementd's
    op program over the module's own parameters and buffers: the optimizer, state_dict() and
    checkpoints see what placementd moves. Inputs are flattened and outputs rebuilt (dicts,
    dataclasses such as transformers' ModelOutput) by the program's own pytree specs."""

    def __init__(self, model, args, kwargs, dynamic_batch, name):
        from torch._export.serde.serialize import serialize
        from torch.export import Dim

        dynamic_shapes = None
        if dynamic_batch:
            small = [
                tuple(v.shape)
                for v in pytree.tree_leaves((args, kwargs))
                if torch.is_tensor(v) and v.dim() > 0 and v.shape[0] <= 1
            ]
            if small:
                warnings.warn(
                    f"an example input's batch dimension is {small[0][0]} ({small[0]}): torch.export "
                    "specializes batches of 0 and 1, so other batch sizes will not run; give examples "
                    "with a batch of at least 2",
                    stacklevel=3,
                )
            # Dim.AUTO on every input's first dimension: a smaller last batch runs on the same program.
            bound = inspect.signature(model.forward).bind(*args, **kwargs)
            dynamic_shapes = {
                key: pytree.tree_map(lambda v: {0: Dim.AUTO} if torch.is_tensor(v) and v.dim() > 0 else None, value)
                for key, value in bound.arguments.items()
            }
        # Exporting runs the model on fake tensors; the job's own random numbers (dropout masks)
        # must come out as they would without placementd.
        # Only a CUDA generator already in use can move; forking every GPU's would start them all.
        cuda = [torch.cuda.current_device()] if torch.cuda.is_initialized() else []
        output = None
        try:
            with torch.random.fork_rng(devices=cuda), _export_output_held() as output:
                program = torch.export.export(model, tuple(args), kwargs, strict=False, dynamic_shapes=dynamic_shapes)
        except Exception as e:
            error = CaptureError(_export_failure(model, e))
            error.detail = output() if output else ""
            raise error from e
        _drop_masks_that_mask_nothing(program.graph_module)
        self.constants = None
        self.in_spec = program.call_spec.in_spec
        self.out_spec = program.call_spec.out_spec
        tensors = {}
        own = dict(model.named_parameters(remove_duplicate=False))
        own.update(model.named_buffers(remove_duplicate=False))
        for key, value in list(program.state_dict.items()) + list(program.constants.items()):
            if torch.is_tensor(value):
                # The module's own tensor object where it has one (export may hold a detached alias).
                tensors[key] = own.get(key, value)
        _name_namedtuples(self.in_spec)
        _name_namedtuples(self.out_spec)
        self.model = _Model.from_export(serialize(program).exported_program, tensors, type(model).__name__)

    def flatten(self, args, kwargs):
        """The tensors the program takes, in its order. Other leaves (an int, a bool flag) were
        exported as constants: they must be what they were then."""
        from torch.export._tree_utils import reorder_kwargs

        flat, spec = pytree.tree_flatten((tuple(args), reorder_kwargs(dict(kwargs), self.in_spec)))
        if spec != self.in_spec:
            raise ValueError(f"the inputs' structure {spec} is not the one the model was exported with {self.in_spec}")
        if self.constants is None:
            self.constants = [_TENSOR if torch.is_tensor(v) else v for v in flat]
        for i, (v, c) in enumerate(zip(flat, self.constants)):
            if c is _TENSOR:
                if not torch.is_tensor(v):
                    raise TypeError(f"inputs[{i}] is a {type(v).__name__}, not a torch.Tensor")
            elif torch.is_tensor(v) or v != c:
                raise ValueError(f"input leaf {i} is {v!r}; the model was exported with {c!r}, which it keeps")
        return [v for v in flat if torch.is_tensor(v)]

    def unflatten(self, outputs):
        flat = list(outputs) if isinstance(outputs, tuple) else [outputs]
        return pytree.tree_unflatten(flat, self.out_spec)


def _pure(node):
    """An op of the graph that reads and writes nothing but its arguments and its result, and draws
    no random numbers."""
    return (
        node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and not node.target._schema.is_mutable
        and torch.Tag.nondeterministic_seeded not in node.target.tags
    )


def _constant_value(node, limit=64):
    """What an FX node computes when nothing it depends on is an input, a parameter or a random draw:
    its value, or None. At most `limit` nodes are evaluated."""
    values = {}

    def value(n):
        if n in values:
            return values[n]
        if len(values) >= limit or not _pure(n):
            return None
        for a in pytree.tree_leaves((n.args, n.kwargs)):
            if isinstance(a, torch.fx.Node) and value(a) is None:
                return None
        args, kwargs = pytree.tree_map(lambda a: values[a] if isinstance(a, torch.fx.Node) else a, (n.args, n.kwargs))
        try:
            values[n] = n.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 (what cannot run here is no constant, whatever the reason)
            return None
        return values[n]

    return value(node)


def _all_true(node):
    """Whether a boolean mask is True everywhere whatever the step's inputs: a constant that is, or
    that broadcast to a shape the inputs decide (the batch's size)."""
    if isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is torch.ops.aten.expand.default:
        return _all_true(node.args[0])
    value = _constant_value(node)
    return torch.is_tensor(value) and value.dtype == torch.bool and value.device.type != "meta" and bool(value.all())


def _drop_masks_that_mask_nothing(graph_module):
    """Removes an attention mask every position of which is True from scaled_dot_product_attention.

    transformers builds the mask its eager forward leaves out (no padding, no attention_mask given)
    when torch.export traces it, from aranges alone: all True. The result is the same without it,
    but with it the GPU's attention cannot use its fastest kernels (FlashAttention takes no mask),
    and the step runs some 100 more ops building it and masking the backward. Only masks computed
    from nothing the step is given, but its shapes, are evaluated; a mask that depends on an input
    stays."""
    sdpa = torch.ops.aten.scaled_dot_product_attention.default
    graph = graph_module.graph
    dropped = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not sdpa:
            continue
        mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
        if not isinstance(mask, torch.fx.Node) or not _all_true(mask):
            continue
        if len(node.args) > 3:
            node.args = node.args[:3] + (None,) + node.args[4:]
        else:
            node.kwargs = {**node.kwargs, "attn_mask": None}
        dropped = True
    if not dropped:
        return
    # What built the masks, now read by nothing (with what transformers built beside them and never
    # read). Only pure ops: one that draws random numbers stays, or the job's would not be eager's.
    removed = True
    while removed:
        removed = False
        for node in reversed(list(graph.nodes)):
            # (An op that returns nothing, such as export's runtime asserts, is there for its check.)
            if not node.users and _pure(node) and node.target._schema.returns:
                graph.erase_node(node)
                removed = True
    graph_module.recompile()


def _name_namedtuples(spec):
    """Registers the namedtuples in a pytree spec (torchvision's GoogLeNetOutputs in train mode)
    under their qualified names, which torch.export's serializer requires of them (its error names
    pytree's _register_namedtuple, there being no public spelling yet); the spec itself stays in
    Python, which rebuilds the outputs."""
    # pytree files every namedtuple under collections.namedtuple, the class being its context.
    cls = spec.context if spec.type is collections.namedtuple else None
    if cls is not None and pytree.is_namedtuple_class(cls) and cls not in pytree.SUPPORTED_SERIALIZED_TYPES:
        pytree._register_namedtuple(cls, serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")
    for child in spec.children():
        _name_namedtuples(child)


_EXPORT_OUTPUT = threading.Lock()  # sys.stderr and logging are the process's: one export holds them


@contextlib.contextmanager
def _export_output_held():
    """Keeps what torch.export writes while the block runs off the terminal: a refused export
    prints the partial FX graph it traced to stderr and logs it (hundreds of lines) before it
    raises, and the CaptureError carries that text instead (its `detail`). Yields a function that
    returns the text. When the block ends without an error, everything goes where it would have
    gone. Log records are held where a logger hands them to its handlers, since torch installs
    handlers on loggers it creates while exporting. One export at a time holds them (what another
    thread prints or logs meanwhile is held with it)."""
    with _EXPORT_OUTPUT:
        records, printed = [], io.StringIO()
        original = logging.Logger.handle

        def handle(logger, record):
            if record.name == "torch" or record.name.startswith("torch."):
                records.append(record)
            else:
                original(logger, record)

        def text():
            return "\n".join([printed.getvalue().strip()] + [record.getMessage() for record in records]).strip()

        logging.Logger.handle = handle
        failed = False
        try:
            with contextlib.redirect_stderr(printed):
                yield text
        except BaseException:
            failed = True
            raise
        finally:
            logging.Logger.handle = original
            if not failed:
                sys.stderr.write(printed.getvalue())
                for record in records:
                    logging.getLogger(record.name).handle(record)


def _export_failure(model, error):
    """What torch.export said, shortened to its first lines, and what to do."""
    text = str(error).strip().splitlines()
    head = " ".join(line.strip() for line in text[:3]) if text else type(error).__name__
    return (
        f"cannot export {type(model).__name__} with torch.export: {type(error).__name__}: {head} "
        f"(data-dependent control flow must become torch.cond-free code; or attach with "
        f"frontend='torchscript'; torch's log of the export is this error's `detail`)"
    )


def _inputs(example_inputs):
    if torch.is_tensor(example_inputs):
        return (example_inputs,)
    return tuple(example_inputs)


def capture(
    model: torch.nn.Module,
    example_inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
    name: str = "model",
    path: Optional[str] = None,
    frontend: str = "export",
) -> Dict[str, Any]:
    """The op graph placementd sees for `model` on these inputs (ops, edges, each op's measured
    output bytes), as the dict `placementctl` reads; written to `path` as JSON when given."""
    inputs = _inputs(example_inputs)
    if frontend == "export" and not isinstance(model, torch.jit.ScriptModule):
        exported = _Exported(model, inputs, {}, True, str(name))
        text = _capture_json(exported.model, exported.flatten(inputs, {}), str(name))
    else:
        text = _capture_json(_script(model, inputs), list(inputs), str(name))
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return json.loads(text)

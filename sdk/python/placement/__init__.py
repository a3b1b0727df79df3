"""placementd's Python SDK: a PyTorch training loop lets placementd place its model while it trains.

    import torch, placement
    job = placement.attach("resnet-train", model, (example_input,), devices=["cuda:0", "cuda:1", "cpu"],
                           expected_steps=10_000)
    opt = torch.optim.Adam(job.parameters(), lr=1e-3)
    for x, y in loader:
        loss = job.step((x,), torch.nn.functional.cross_entropy, opt, targets=y)
    print(job.summary())

The loop never waits for placementd: when it is missing or dies, the job trains on its current
placement and attaches again once it is back. docs/python.md has the whole API.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import inspect
import io
import json
import logging
import re
import sys
import threading
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

import torch
from torch.utils import _pytree as pytree

from ._build_info import TORCH_VERSION as _BUILT_AGAINST


def _release(version: str):
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else version


# The extension is C++ compiled against one torch's headers and libraries: beside another release
# (`pip install -U torch`) it fails to load with an undefined symbol, or worse, loads. Say so first.
if _release(torch.__version__) != _release(_BUILT_AGAINST):
    raise ImportError(
        f"placement was built against torch {_BUILT_AGAINST}, and this environment has torch "
        f"{torch.__version__}: its C++ extension runs only beside the torch it was compiled with. "
        "Build it again here: pip install --no-build-isolation --force-reinstall --no-deps <placement's "
        'source or sdist> (docs/python.md, "Installing it with pip")'
    )

from ._placement import CaptureError
from ._placement import __version__
from ._placement import Job as _CppJob
from ._placement import JobOptions as _JobOptions
from ._placement import Model as _Model
from ._placement import capture_json as _capture_json
from ._placement import describe_outcome as _describe_outcome
from ._placement import parameters_digest as _parameters_digest

__all__ = ["attach", "capture", "CaptureError", "Job", "Summary", "parameters_digest", "__version__"]


def parameters_digest(tensors: Iterable[torch.Tensor]) -> str:
    """16 hex digits over every tensor's bytes in order, as the C++ examples print: data-parallel
    replicas whose parameters agree bit for bit print the same."""
    return _parameters_digest([t.detach() for t in tensors])


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


def _first_tensor(value):
    if torch.is_tensor(value):
        return value
    if isinstance(value, (tuple, list)):
        for v in value:
            t = _first_tensor(v)
            if t is not None:
                return t
    if isinstance(value, dict):
        return _first_tensor(list(value.values()))
    return None


def _on_output_device(loss_fn, targets):
    """loss_fn run where the model's (first) output is: under that CUDA device, so tensors it
    makes without a device land there, and with `targets` moved there first and passed after the
    outputs. The loss then never mixes devices, whichever device placementd put the last op on."""

    def run(outputs):
        first = _first_tensor(outputs)
        device = first.device if first is not None else torch.device("cpu")
        scope = torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
        with scope:
            if targets is None:
                return loss_fn(outputs)
            return loss_fn(outputs, *(t.to(device) for t in targets))

    return run


def _stage_optimizer_state(optimizer, parameters, devices):
    """Copies the torch.optim state of `parameters` (filed under each parameter) to `devices`, as
    torch.optim's load_state_dict places it: every tensor next to its parameter, except a
    non-capturable, non-fused optimizer's `step` count, which stays where it is. Returns
    (staged, bytes copied): `staged` lists (state, key, copy), which the job stores as
    state[key] = copy once the parameters' copies are made too (and in a replica group, every
    rank's), from C++, where no Ctrl-C can stop it half way; until then, and when a copy fails,
    the state is as it was, so a swap is all or nothing."""
    group_of = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            group_of[id(p)] = group
    staged = []
    for p, device in zip(parameters, devices):
        state = optimizer.state.get(p)
        if not state:
            continue
        group = group_of.get(id(p), {})
        keep_step = not (group.get("capturable") or group.get("fused"))
        for key, value in state.items():
            if not torch.is_tensor(value) or (key == "step" and keep_step):
                continue
            # A copy even between logical devices of one physical device, as the parameter got.
            staged.append((state, key, value.to(device, copy=True)))
    return staged, sum(value.numel() * value.element_size() for _, _, value in staged)


def _save_optimizer_state(optimizer, parameters):
    """Before a guarded update (attach's guarded_updates): a host copy of the torch.optim state of
    `parameters`, `step` counts included. Returns (restore, bytes copied): restore() copies the
    values back into the same tensors (a foreach or fused step updates those in place, on their
    devices), puts back entries the step replaced and drops the state the step created."""
    saved, created, copied = [], [], 0
    with torch.no_grad():
        for p in parameters:
            state = optimizer.state.get(p)
            if state is None:
                created.append(p)
                continue
            entries = {}
            for key, value in state.items():
                if torch.is_tensor(value):
                    entries[key] = (value, value.detach().to("cpu", copy=True))
                    copied += value.numel() * value.element_size()
                else:
                    entries[key] = (copy.deepcopy(value), None)
            saved.append((p, entries))

    def restore():
        with torch.no_grad():
            for p in created:
                optimizer.state.pop(p, None)
            for p, entries in saved:
                state = {}
                for key, (value, host) in entries.items():
                    if host is not None:
                        value.copy_(host)
                    state[key] = value
                optimizer.state[p] = state

    return restore, copied


# torch.optim's classes whose state per parameter is known, by the options of the parameter's group:
# how many tensors shaped like the parameter they keep once they have stepped it. Exact types only:
# a subclass may keep other state, and a guess too high would refuse a placement that fits.
_STATE_TENSORS = {
    torch.optim.Adam: lambda group: 3 if group.get("amsgrad") else 2,
    torch.optim.AdamW: lambda group: 3 if group.get("amsgrad") else 2,
    torch.optim.SGD: lambda group: 1 if group.get("momentum", 0) != 0 else 0,
    torch.optim.RMSprop: lambda group: 1 + (group.get("momentum", 0) > 0) + bool(group.get("centered")),
    torch.optim.Adagrad: lambda group: 1,
}


def _expected_state_bytes(optimizer, parameter):
    """The bytes of state `optimizer` keeps for `parameter` once it has stepped it (Adam's two
    moments: twice the parameter's bytes; 0 for a parameter it does not update), or None when it
    cannot tell: what a memory limit holds a placement to before the first update."""
    tensors = _STATE_TENSORS.get(type(optimizer))
    if tensors is None:
        return None
    for group in optimizer.param_groups:
        if any(p is parameter for p in group["params"]):
            return tensors(group) * parameter.numel() * parameter.element_size()
    return 0


def _steps_parameters_apart(optimizer):
    """Whether job.step may update some of `optimizer`'s parameters apart from the rest (those that
    live on the host, while the backward goes on): torch.optim's classes whose step reads each
    parameter's value, gradient and state alone. Exact types only: a subclass may override step()
    with something over all of them (a norm, a closure)."""
    return type(optimizer) in _STATE_TENSORS


def _step_parameters(optimizer, parameters):
    """optimizer.step() over `parameters` only, each with its group's options: for the call each
    group holds those of them it holds, and all of its own again after, however the step ends. The
    optimizer's step hooks run at each such call."""
    wanted = {id(p) for p in parameters}
    groups = optimizer.param_groups
    held = [group["params"] for group in groups]
    try:
        for group, params in zip(groups, held):
            group["params"] = [p for p in params if id(p) in wanted]
        optimizer.step()
    finally:
        for group, params in zip(groups, held):
            group["params"] = params


class _TorchOptim:
    """What the C++ job asks of a torch.optim optimizer beyond step() and zero_grad()."""

    stage_state = staticmethod(_stage_optimizer_state)
    save_state = staticmethod(_save_optimizer_state)
    expected_state_bytes = staticmethod(_expected_state_bytes)
    steps_parameters_apart = staticmethod(_steps_parameters_apart)
    step_parameters = staticmethod(_step_parameters)


def _residence_rules(residence):
    """attach()'s `residence` as the two rule tables the C++ job takes: {"parameters": {module
    prefix: device or (device, "persist" | "stream")}, "activations": {module prefix: "keep" |
    "recompute" | ("offload", device)}}."""
    if residence is None:
        return {}, {}
    if not isinstance(residence, dict) or set(residence) - {"parameters", "activations"}:
        raise ValueError("residence is a dict with the keys 'parameters' and 'activations'")
    parameters, activations = {}, {}
    for prefix, rule in residence.get("parameters", {}).items():
        device, fetch = (rule, "persist") if isinstance(rule, str) else tuple(rule)
        parameters[str(prefix)] = (str(device), str(fetch))
    for prefix, rule in residence.get("activations", {}).items():
        policy, device = (rule, "") if isinstance(rule, str) else tuple(rule)
        activations[str(prefix)] = (str(policy), str(device))
    return parameters, activations


class Summary(dict):
    """Job.summary(): a dict, printed as the lines `placementctl jobs show` and the C++ examples
    print: what the job gained against its start placement (realized, exploration included), what
    the best gains a step, what the steps off the best cost, what runs now and whether
    exploration finished."""

    def __str__(self):
        lines = [
            ("steps", f"{self['steps']} ({self['retried_steps']} retried)"),
            (
                "placement swaps",
                f"{self['swaps']} ({self['migrated_bytes'] / 1e6:.1f} MB moved in "
                f"{self['migration_seconds'] * 1e3:.1f} ms), {self['failed_swaps']} failed",
            ),
        ]
        lines += [("placementd said at attach", notice) for notice in self.get("notices", [])]
        view = self.get("placementd")
        if view is None:
            lines.append(("placementd", f"no view of the job: {self.get('placementd_error')}"))
        else:
            lines.append(("placementd state", view["state"]))
            lines += _describe_outcome(json.dumps(view))
        width = max([34] + [len(label) + 1 for label, _ in lines])  # the C++ examples' column
        return "\n".join(f"{label:<{width}} {value}" for label, value in lines)


class Job:
    """A model in training whose placement placementd chooses. Use it from the training thread."""

    def __init__(
        self,
        name: str,
        model: torch.nn.Module,
        example_inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
        *,
        example_kwargs: Optional[Dict[str, Any]] = None,
        dynamic_batch: bool = True,
        frontend: str = "export",
        devices: Optional[Sequence[str]] = None,
        expected_steps: int = 0,
        socket: Optional[str] = None,
        memory_bytes: int = 0,
        use_daemon: bool = True,
        start: Optional[Sequence[int]] = None,
        memory_limit_bytes: Optional[Sequence[int]] = None,
        profile_graph_file: Optional[str] = None,
        profile_steps: int = 3,
        reconnect_interval_ms: int = 1000,
        replica_timeout_ms: int = 60000,
        cuda_collectives: str = "auto",
        residence: Optional[Dict[str, Dict[str, Any]]] = None,
        guarded_updates: int = 1,
        overlap_updates: bool = True,
        host_pinned_bytes: int = 0,
    ) -> None:
        inputs = _inputs(example_inputs)
        kwargs = dict(example_kwargs or {})
        self._exported = None
        if frontend == "export" and not isinstance(model, torch.jit.ScriptModule):
            if not isinstance(model, torch.nn.Module):
                raise TypeError(f"model is a {type(model).__name__}, not a torch.nn.Module or torch.jit.ScriptModule")
            self._exported = _Exported(model, inputs, kwargs, dynamic_batch, str(name))
            self.module = model
            program, flat = self._exported.model, self._exported.flatten(inputs, kwargs)
        elif frontend in ("export", "torchscript"):
            if kwargs:
                raise ValueError("example_kwargs needs frontend='export'")
            self.module = program = _script(model, inputs)
            flat = list(inputs)
        else:
            raise ValueError(f"frontend is 'export' or 'torchscript', not {frontend!r}")
        options = _JobOptions()
        options.devices = list(devices or [])
        options.socket_path = socket or ""
        options.expected_steps = int(expected_steps)
        options.memory_bytes = int(memory_bytes)
        options.use_daemon = bool(use_daemon)
        options.start_device_of_op = list(start or [])
        options.memory_limit_bytes = [int(b) for b in (memory_limit_bytes or [])]
        options.profile_graph_file = profile_graph_file or ""
        options.profile_steps = int(profile_steps)
        options.reconnect_interval_ms = int(reconnect_interval_ms)
        options.replica_timeout_ms = int(replica_timeout_ms)
        options.cuda_collectives = str(cuda_collectives)
        options.guarded_updates = int(guarded_updates)
        options.overlap_updates = bool(overlap_updates)
        if int(host_pinned_bytes) < 0:
            raise ValueError(f"host_pinned_bytes must be >= 0, not {host_pinned_bytes}")
        options.host_pinned_bytes = int(host_pinned_bytes)
        options.set_residence_rules(*_residence_rules(residence))
        self._job = _CppJob(str(name), program, flat, options)
        self._detached = None
        self._use_daemon = bool(use_daemon)
        # What placementd said the job should know (its exploration cannot finish in expected_steps).
        for notice in self._job.daemon()["notices"]:
            warnings.warn(f"placementd: {notice}", stacklevel=3)

    def parameters(self) -> List[torch.Tensor]:
        """The module's parameters, for the optimizer: the same tensors across placements."""
        return self._job.parameters()

    def residence_activity(self) -> Dict[str, int]:
        """What the engine did under the placement in force to keep tensors where its residence
        says: proxies (parameters read through a copy on their readers' device, `streamed` of them
        filled for each use), parameter_fetches and parameter_bytes_fetched (copies from a
        parameter's home into its proxy), parameter_prefetches (those of the fetches made ahead
        of the op that reads the parameter, on a GPU while the ops before it compute),
        gradient_bytes_sent_home, activations_evicted (offloaded
        or recomputed) and their bytes, recompute_kept."""
        return self._job.residence_activity()

    def step(
        self,
        inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
        loss_fn: Callable[..., torch.Tensor],
        optimizer: torch.optim.Optimizer,
        targets: Union[torch.Tensor, Sequence[torch.Tensor], None] = None,
        kwargs: Optional[Dict[str, Any]] = None,
    ) -> torch.Tensor:
        """One training step under the placement in force: applies a pending placement at the step
        boundary (parameters and the optimizer's state move), forward, loss_fn(outputs), backward,
        optimizer.step(), optimizer.zero_grad(); reports the step's time to placementd without
        waiting. With `targets` (a tensor or a tuple of them, on any device), the loss is
        loss_fn(outputs, *targets) with the targets moved to the device of the model's output,
        where the placement in force put it. A step that fails under a placement placementd
        proposed (in loss_fn too) is run again on the last good one from the buffers and random
        state it began with, so no batch is lost or counted twice; KeyboardInterrupt and
        SystemExit end it at once. Returns the loss, detached."""
        if targets is not None:
            targets = _inputs(targets)
        if self._exported is None:
            if kwargs:
                raise ValueError("kwargs needs frontend='export'")
            return self._job.step(list(_inputs(inputs)), _on_output_device(loss_fn, targets), optimizer, _TorchOptim)
        exported = self._exported
        restructured = _on_output_device(loss_fn, targets)
        return self._job.step(
            exported.flatten(_inputs(inputs), kwargs or {}),
            lambda outputs: restructured(exported.unflatten(outputs)),
            optimizer,
            _TorchOptim,
        )

    @property
    def placement(self) -> List[int]:
        """Device index of each op (indices into device_names)."""
        return self._job.placement()

    @property
    def device_names(self) -> List[str]:
        return self._job.device_names()

    def stats(self) -> Dict[str, Any]:
        """Steps, swaps, migrated bytes, retried steps and the placement in force, as a dict."""
        return self._job.stats()

    def daemon(self) -> Dict[str, Any]:
        """The connection to placementd: connected, session, attaches, reports sent and dropped."""
        return self._job.daemon()

    def summary(self) -> Summary:
        """What the job ran and what placementd did for it, as a Summary: a dict of stats(), "daemon"
        (daemon(); after detach(), what placementd answered to it) and "placementd", placementd's
        view of the job (`placementctl jobs show --json`: the realized speed-up, the time the steps
        off the best placement cost, whether exploration finished), None when it could not be asked
        ("placementd_error" says why). print() it for the lines a person reads."""
        out = Summary(self._job.stats())
        daemon = self._job.daemon()
        out["daemon"] = self._detached if self._detached is not None else daemon
        out["notices"] = list(daemon["notices"])
        out["placementd"], out["placementd_error"] = None, None
        if not self._use_daemon:
            out["placementd_error"] = "the job runs without placementd (use_daemon=False)"
        elif daemon["session"]:
            try:
                out["placementd"] = json.loads(self._job.placementd_view())
            except Exception as e:  # placementd gone or restarted: the job's own figures stand
                out["placementd_error"] = str(e)
        else:
            out["placementd_error"] = daemon["last_error"] or "the job never attached to placementd"
        return out

    def detach(self) -> Dict[str, Any]:
        """Sends the last reports and detaches from placementd (once; later calls return the same)."""
        if self._detached is None:
            self._detached = self._job.detach()
        return self._detached

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False


def attach(
    name: str,
    model: torch.nn.Module,
    example_inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
    *,
    example_kwargs: Optional[Dict[str, Any]] = None,
    dynamic_batch: bool = True,
    frontend: str = "export",
    **options: Any,
) -> Job:
    """Job(name, model, example_inputs, ...): `model` is an nn.Module, exported with torch.export
    (frontend="export", the default: training IR, strict=False, a dynamic batch dimension unless
    dynamic_batch=False; outputs come back in the model's own structure) or traced with TorchScript
    (frontend="torchscript"), or a ScriptModule; options as Job's (devices, expected_steps, socket, ...)."""
    return Job(
        name,
        model,
        example_inputs,
        example_kwargs=example_kwargs,
        dynamic_batch=dynamic_batch,
        frontend=frontend,
        **options,
    )


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

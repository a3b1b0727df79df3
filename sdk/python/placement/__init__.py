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

import contextlib

import torch

from ._placement import CaptureError
from ._placement import Job as _CppJob
from ._placement import capture_json as _capture_json
from ._placement import parameters_digest as _parameters_digest

__all__ = ["attach", "capture", "CaptureError", "Job", "parameters_digest"]


def parameters_digest(tensors):
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


def _move_optimizer_state(optimizer, parameters, devices):
    """Moves the torch.optim state of `parameters` (filed under each parameter) to `devices`, as
    torch.optim's load_state_dict places it: every tensor next to its parameter, except a
    non-capturable, non-fused optimizer's `step` count, which stays where it is. All copies are
    made before any is installed, so a failure leaves the state as it was. Returns bytes copied."""
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
    moved = 0
    for state, key, value in staged:
        state[key] = value
        moved += value.numel() * value.element_size()
    return moved


class Job:
    """A model in training whose placement placementd chooses. Use it from the training thread."""

    def __init__(self, name, model, example_inputs, *, devices=None, expected_steps=0, socket=None,
                 memory_bytes=0, use_daemon=True, start=None, memory_limit_bytes=None,
                 profile_graph_file=None, profile_steps=3, reconnect_interval_ms=1000, replica_timeout_ms=60000,
                 cuda_collectives="auto"):
        inputs = _inputs(example_inputs)
        self.module = _script(model, inputs)
        self._job = _CppJob(str(name), self.module, list(inputs), list(devices or []), socket or "",
                            int(expected_steps), int(memory_bytes), bool(use_daemon), list(start or []),
                            [int(b) for b in (memory_limit_bytes or [])], profile_graph_file or "",
                            int(profile_steps), int(reconnect_interval_ms), int(replica_timeout_ms),
                            str(cuda_collectives))
        self._detached = None

    def parameters(self):
        """The module's parameters, for the optimizer: the same tensors across placements."""
        return self._job.parameters()

    def step(self, inputs, loss_fn, optimizer, targets=None):
        """One training step under the placement in force: applies a pending placement at the step
        boundary (parameters and the optimizer's state move), forward, loss_fn(outputs), backward,
        optimizer.step(), optimizer.zero_grad(); reports the step's time to placementd without
        waiting. With `targets` (a tensor or a tuple of them, on any device), the loss is
        loss_fn(outputs, *targets) with the targets moved to the device of the model's output,
        where the placement in force put it. A step that fails under a placement placementd
        proposed is run again on the last good one, so no batch is lost. Returns the loss, detached."""
        if targets is not None:
            targets = _inputs(targets)
        return self._job.step(list(_inputs(inputs)), _on_output_device(loss_fn, targets), optimizer,
                              _move_optimizer_state)

    @property
    def placement(self):
        """Device index of each op (indices into device_names)."""
        return self._job.placement()

    @property
    def device_names(self):
        return self._job.device_names()

    def stats(self):
        """Steps, swaps, migrated bytes, retried steps and the placement in force, as a dict."""
        return self._job.stats()

    def daemon(self):
        """The connection to placementd: connected, session, attaches, reports sent and dropped."""
        return self._job.daemon()

    def summary(self):
        """stats() and daemon() together; after detach(), what placementd answered to it."""
        out = dict(self._job.stats())
        out["daemon"] = self._detached if self._detached is not None else self._job.daemon()
        return out

    def detach(self):
        """Sends the last reports and detaches from placementd (once; later calls return the same)."""
        if self._detached is None:
            self._detached = self._job.detach()
        return self._detached

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False


def attach(name, model, example_inputs, **options):
    """Job(name, model, example_inputs, **options): `model` is an nn.Module (traced on the example
    inputs) or a ScriptModule; options as Job's (devices, expected_steps, socket, ...)."""
    return Job(name, model, example_inputs, **options)


def capture(model, example_inputs, name="model", path=None):
    """The op graph placementd sees for `model` on these inputs (ops, edges, each op's measured
    output bytes), as the dict `placementctl` reads; written to `path` as JSON when given."""
    import json

    inputs = _inputs(example_inputs)
    text = _capture_json(_script(model, inputs), list(inputs), str(name))
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return json.loads(text)

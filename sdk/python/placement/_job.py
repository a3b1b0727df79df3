"""Job, attach() and Summary: the training loop's side of placementd."""

from __future__ import annotations

import contextlib
import json
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

from ._export import _Exported, _inputs, _script
from ._optimizers import _TorchOptim
from ._placement import Job as _CppJob
from ._placement import JobOptions as _JobOptions
from ._placement import describe_outcome as _describe_outcome


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

"""What the C++ job asks of a torch.optim optimizer beyond step() and zero_grad(): its state staged
and saved for a swap or a guarded update, its expected size, and stepping parameters apart."""

from __future__ import annotations

import copy

import torch


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

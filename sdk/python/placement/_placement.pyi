"""Type stubs of placement._placement, the C++ extension under the placement package (module.cpp).
Users call placement.attach / placement.Job; these are what that package calls."""

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

__version__: str

class CaptureError(ValueError):
    """The model cannot be captured into placementd's op program (and why)."""

class Model:
    @staticmethod
    def from_export(program: bytes, tensors: Mapping[str, torch.Tensor], origin: str) -> "Model": ...
    @property
    def frontend(self) -> str: ...
    @property
    def num_inputs(self) -> int: ...

class Job:
    def __init__(
        self,
        name: str,
        module: Any,
        example_inputs: Sequence[torch.Tensor],
        devices: List[str],
        socket: str,
        expected_steps: int,
        memory_bytes: int,
        use_daemon: bool,
        start_device_of_op: List[int],
        memory_limit_bytes: List[int],
        profile_graph_file: str,
        profile_steps: int,
        reconnect_interval_ms: int,
        replica_timeout_ms: int,
        cuda_collectives: str,
        residence_parameters: Dict[str, Tuple[str, str]],
        residence_activations: Dict[str, Tuple[str, str]],
        guarded_updates: int,
    ) -> None: ...
    def parameters(self) -> List[torch.Tensor]: ...
    def step(
        self,
        inputs: Sequence[torch.Tensor],
        loss: Callable[[Any], torch.Tensor],
        optimizer: Any,
        stage_state: Callable[[Any, List[torch.Tensor], List[str]], Tuple[List[Tuple[Dict[str, Any], str, torch.Tensor]], int]],
        save_state: Callable[[Any, List[torch.Tensor]], Tuple[Callable[[], None], int]],
        expected_state: Callable[[Any, torch.Tensor], Optional[int]],
    ) -> torch.Tensor: ...
    def placement(self) -> List[int]: ...
    def device_names(self) -> List[str]: ...
    def graph_json(self) -> str: ...
    def placement_json(self) -> str: ...
    def residence_activity(self) -> Dict[str, int]: ...
    def stats(self) -> Dict[str, Any]: ...
    def daemon(self) -> Dict[str, Any]: ...
    def placementd_view(self) -> str: ...
    def detach(self) -> Dict[str, Any]: ...

def parameters_digest(tensors: Sequence[torch.Tensor]) -> str: ...
def capture_json(module: Any, example_inputs: Sequence[torch.Tensor], name: str) -> str: ...
def describe_outcome(job_json: str) -> List[Tuple[str, str]]: ...

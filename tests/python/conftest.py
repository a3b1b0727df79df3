"""Fixtures for the Python SDK's tests: a real placementd process (PLACEMENTD_BIN, with the
project's plugins from PLACEMENT_PLUGIN_DIR) that explores fast, and the training loop they share.
CTest sets those variables and PYTHONPATH (tests/CMakeLists.txt, python.sdk.*)."""

import os
import signal
import subprocess
import tempfile
import time

import pytest
import torch


class Daemon:
    """placementd with a config of its own in a temporary directory."""

    def __init__(self, directory):
        self.dir = directory
        self.socket = os.path.join(directory, "pd.sock")
        self.log_path = os.path.join(directory, "placementd.log")
        self.config = os.path.join(directory, "placementd.toml")
        with open(self.config, "w") as f:
            f.write(f"""[daemon]
socket = "{self.socket}"
state_dir = "{directory}/state"
[plugins]
dirs = ["{os.environ["PLACEMENT_PLUGIN_DIR"]}"]
[logging]
level = "info"
[policy]
grouper = "none"
[exploration]
steps_per_candidate = 3
warmup_steps = 1
max_candidates = 12
converge_candidates = 0
trial_window_steps = 1
max_trial_steps = 32
max_overhead_fraction = 0.5
""")
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            [os.environ["PLACEMENTD_BIN"], "--config", self.config],
            stdout=open(self.log_path, "ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"placementd exited with {self.process.returncode}:\n{self.log()}")
            status = subprocess.run(
                [os.environ["PLACEMENTCTL_BIN"], "--socket", self.socket, "status"], capture_output=True
            )
            if status.returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError(f"placementd did not answer within 10 s:\n{self.log()}")

    def kill(self, signo=signal.SIGKILL):
        self.process.send_signal(signo)
        self.process.wait(10)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


@pytest.fixture
def daemon():
    with tempfile.TemporaryDirectory(prefix="pdpy.", dir="/tmp") as directory:  # socket paths are short
        d = Daemon(directory)
        d.start()
        yield d
        if d.process.poll() is None:
            d.kill(signal.SIGTERM)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 64)
        self.c = torch.nn.Linear(64, 4)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def batch(step):
    """The step's batch: the same in every run, whatever ran before."""
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(8, 32, generator=g), torch.randn(8, 4, generator=g)


def mse_to(y):
    return lambda out: ((out - y) ** 2).mean()

#!/usr/bin/env python3
"""Runs every command line that README.md and docs/*.md show in ```sh blocks, as written.

A line runs after these substitutions only: the build's binaries for build/bin/ (and for a bare
placementd or placementctl), the build directory for build/ in a NAME=build/... setting, this
Python for .venv/bin/python, private temporary paths for /tmp/pd.sock, /tmp/pd-state and curve.svg,
and real files for the placeholders G.json, TOPO.toml, P.json, M.pt, model.pt, model.pt2, ID and <pid>. A line
with optional parts ([--all]) runs once bare and once with each part (SYNOPSES lists the concrete
forms of lines whose parts do not combine freely). A line this test cannot run here is in SKIPPED with
the reason and what covers it instead. Any other line fails the test: a new command in the docs needs
a test.

Every ```toml block must be valid on its own: a device topology (it has [[device]]) is loaded by
`placementctl simulate`, anything else is checked as a placementd.toml by `placementctl config check`.

usage: doc_commands_test.py SOURCE_DIR BUILD_DIR
"""

import gzip
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SKIPPED = {
    "./scripts/run.sh": "the whole demo (installs, builds, trains); CI runs scripts/test.sh, which builds the same",
    "./scripts/test.sh": "it is what CI runs (.ci/run), and this test runs inside it",
    "scripts/install-deps.sh": "installs system packages; run by scripts/test.sh in CI",
    "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=\"$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')\"": "configures the build this test runs in (scripts/test.sh runs the same configure)",
    "cmake --build build": "builds the build this test runs in",
    "ctest --test-dir build -j2 --output-on-failure": "runs this test",
    "scripts/gpu-run.sh --stage build": "needs a GPU machine (docs/gpu-runs/)",
    "PYTHONPATH=build/python .venv/bin/python bench/python/offload_bench.py --cpu --check": "a minute of one core; python.offload_bench runs the same command",
    "PYTHONPATH=build/python .venv/bin/python bench/python/overlap_bench.py --check": "half a minute of both cores; python.overlap_bench runs the same program at a tiny size",
    "PYTHONPATH=build/python .venv/bin/python bench/python/overlap_bench.py --fused --check": "half a minute of both cores; python.overlap_bench runs the same program at a tiny size",
    "PYTHONPATH=build/python .venv/bin/python bench/python/offload_bench.py --model gpt2 --ratio 1.5 --check": "needs a GPU machine; scripts/gpu-run.sh --stage offload runs it there",
    "build/bin/hostile_bench --clients policy-flood --seconds 5 --rounds 2": "half a minute of both cores; limits.hostile runs the same program with policy-flood among its clients",
    'build/bin/hostile_bench --clients policy-flood --seconds 5 --rounds 2 --daemon-key "policy_threads_per_uid = 3"': "half a minute of both cores; limits.hostile runs the same program with policy-flood among its clients",
    "cmake --install build --prefix /usr": "installs into /usr and /etc; install.layout runs it staged under DESTDIR",
    "systemd-sysusers": "creates a system group; systemd.units_verify checks the sysusers entry",
    "systemctl enable --now placementd.socket": "needs systemd as PID 1; systemd.units_verify checks the units",
    "usermod -aG placement alice": "changes a system user",
    "usermod -aG placement-admin bob": "changes a system user",
    "cpack --config build/CPackConfig.cmake -B build/packages -G DEB": "package.deb runs it (tests/install/deb_package.sh)",
    "build/bin/live_noise_harness --seeds 1000": "a minute of both cores; live.noise_harness runs the same program at 100 seeds",
    "build/bin/live_noise_harness --seeds 1000 --noise 0.2,0.3 --steps 200000": "a minute of both cores; live.noise_harness runs the same program at 100 seeds",
    "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 build/bin/train_gnmt --model M.pt --steps 60 --socket /tmp/pd.sock &": "a replica group of two processes on a fixed port; Replicas.* (tests/integration/replicas_test.cpp) runs it on a free port",
    "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 build/bin/train_gnmt --model M.pt --steps 60 --socket /tmp/pd.sock": "a replica group of two processes on a fixed port; Replicas.* (tests/integration/replicas_test.cpp) runs it on a free port",
    "pip install scikit-build-core": "installs from PyPI; scripts/python-requirements.txt pins it for the tests",
    "pip install --no-build-isolation .": "builds the SDK once more (5 minutes); python.wheel builds and installs "
    "the same pyproject from an sdist (tests/install/python_wheel.sh)",
    "pip install --no-build-isolation placement-0.1.0.tar.gz": "python.wheel runs it on an sdist it makes "
    "(tests/install/python_wheel.sh)",
    "python -c 'import placement; print(placement.__version__)'": "python.wheel imports the installed package "
    "and checks __version__",
    "apt install ./build/packages/placementd_*.deb": "installs into the system; package.deb_apt_install runs it where that is allowed (CI)",
}

# Lines whose optional parts do not combine freely: the concrete forms that run.
SYNOPSES = {
    "placementctl capture model.pt --input 1x3x224x224 [--input ...] [--dtype int64] [--profile cpu] -o graph.json.gz": [
        "placementctl capture model.pt --input 1x3x224x224 -o graph.json.gz",
        "placementctl capture model.pt --input 1x3x224x224 --profile cpu -o graph.json.gz",
    ],
}


def command_lines(source):
    """(file, line number, command) for every line of every ```sh block, continuations joined."""
    out = []
    for doc in [source / "README.md"] + sorted((source / "docs").glob("*.md")):
        in_sh, pending, start = False, "", 0
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if line.startswith("```"):
                in_sh = not in_sh and line.strip() == "```sh"
                continue
            if not in_sh:
                continue
            text = line.strip()
            if not pending:
                start = number
            if text.endswith("\\"):
                pending += text[:-1].strip() + " "
                continue
            text = (pending + text).strip()
            pending = ""
            # A comment starts at a '#' that follows whitespace outside quotes.
            text = re.split(r"\s+#\s", text, maxsplit=1)[0].strip() if " #" in text else text
            if text:
                out.append((doc.relative_to(source), start, text))
    return out


def toml_blocks(source):
    """(file, line number, text) of every ```toml block."""
    out = []
    for doc in [source / "README.md"] + sorted((source / "docs").glob("*.md")):
        lines = doc.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if line.strip() == "```toml":
                end = next(i for i in range(number, len(lines)) if lines[i].startswith("```"))
                out.append((doc.relative_to(source), number + 1, "\n".join(lines[number:end]) + "\n"))
    return out


def variants(command):
    if command in SYNOPSES:
        return SYNOPSES[command]
    parts = re.findall(r"\s\[([^\]]+)\]", command)
    bare = re.sub(r"\s\[[^\]]+\]", "", command)
    return [bare] + [bare + " " + p for p in parts]


class Sandbox:
    def __init__(self, source, build, tmp):
        self.source, self.build, self.tmp = source, build, tmp
        models = build / "tests" / "models"
        # Whole words of a command line, and what they stand for here.
        self.words = {
            "/tmp/pd.sock": tmp / "pd.sock",
            "/tmp/pd-state": tmp / "pd-state",
            "curve.svg": tmp / "curve.svg",
            "graph.json.gz": tmp / "graph.json.gz",
            "/etc/placementd/placementd.toml": source / "etc" / "placementd.toml",
            "G.json": tmp / "G.json",
            "TOPO.toml": source / "tests" / "data" / "topologies" / "1xh100_cpu.toml",
            "P.json": tmp / "best.json",
            "M.pt": models / "inception_example.pt",
            "model.pt": models / "resnet18.pt",
            "model.pt2": models / "exported" / "bert_small.pt2",
            "ID": "1",
        }
        self.write_profiled_graph(source / "tests" / "data" / "graphs" / "rnnlm.json.gz", tmp / "G.json")
        self.env = dict(os.environ, PLACEMENTD_SOCKET=str(tmp / "pd.sock"), OMP_NUM_THREADS="1", BUILD_DIR=str(build))
        self.daemon = None

    @staticmethod
    def write_profiled_graph(capture, out):
        """G.json: a captured graph with CPU profiles, given CUDA ones 10x faster, so that it can be
        planned on the docs' topologies (a CPU and an H100)."""
        graph = json.loads(gzip.open(capture).read())
        for op in graph["ops"]:
            cpu = op.get("profile", {}).get("cpu")
            if cpu:
                op["profile"]["cuda"] = {k: (v / 10 if k.endswith("_s") else v) for k, v in cpu.items()}
        graph.pop("fingerprint", None)
        out.write_text(json.dumps(graph))

    def concrete(self, command):
        words = command.split(" ")
        for i, word in enumerate(words):
            if word in self.words:
                word = str(self.words[word])
            elif word == "<pid>" and self.daemon:
                word = str(self.daemon.pid)
            elif word.startswith("build/"):
                word = str(self.build / word[len("build/") :])
            elif re.fullmatch(r"[A-Z_]+=build/\S*", word):  # PYTHONPATH=build/python
                name, path = word.split("=", 1)
                word = name + "=" + str(self.build / path[len("build/") :])
            elif word == ".venv/bin/python":  # the Python whose torch the build links: this one
                word = sys.executable
            elif word.startswith(("tests/", "etc/", "examples/", "scripts/", "bench/")):
                word = str(self.source / word)
            elif i == 0 and word in ("placementd", "placementctl"):
                word = str(self.build / "bin" / word)
            words[i] = word
        return " ".join(words)

    # The limit is for a hang: the longest command took under 100 s on a slow VM (2026-12-02), and
    # a CI machine may be 2.5 times slower still.
    def run(self, command, timeout=1200):
        if command.endswith("&"):
            return self.start_daemon(command[:-1].strip())
        result = subprocess.run(
            command, shell=True, cwd=self.tmp, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if result.returncode != 0:
            return f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
        if "kill -HUP" in command:
            time.sleep(0.5)
            if self.daemon.poll() is not None:
                return "placementd ended after SIGHUP"
        return None

    def start_daemon(self, command):
        log = open(self.tmp / "placementd.log", "w")
        self.daemon = subprocess.Popen(shlex.split(command), cwd=self.tmp, env=self.env, stdout=log, stderr=log)
        status = [str(self.build / "bin" / "placementctl"), "--socket", str(self.tmp / "pd.sock"), "status"]
        for _ in range(200):
            if self.daemon.poll() is not None:
                return "placementd exited: " + (self.tmp / "placementd.log").read_text()[-3000:]
            if subprocess.run(status, capture_output=True, env=self.env).returncode == 0:
                return self.setup_job()
            time.sleep(0.05)
        return "placementd did not answer within 10 s"

    def setup_job(self):
        """Job 1, for the lines that show it: a job that attaches and holds its session."""
        hold = self.build / "bin" / "hold_job"
        graph = self.source / "examples" / "graphs" / "two_tower_mlp.json"
        self.job = subprocess.Popen(
            [
                str(hold),
                "--socket",
                str(self.tmp / "pd.sock"),
                "--graph",
                str(graph),
                "--job",
                "docs",
                "--reports",
                "20",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.job.stdout.readline()
        return None if line.startswith("ready") else "hold_job did not attach: " + line

    def close(self):
        for p in (getattr(self, "job", None), self.daemon):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()


def main():
    source, build = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    lines = command_lines(source)
    failures, ran, skipped = [], 0, 0
    shown = {command for _, _, command in lines}
    for stale in sorted((set(SKIPPED) | set(SYNOPSES)) - shown):
        failures.append(f"`{stale}` is listed in {Path(__file__).name} but no document shows it any more")
    with tempfile.TemporaryDirectory(prefix="pdoc.") as tmp:
        box = Sandbox(source, build, Path(tmp))
        # The daemon lines first: the others talk to it.
        ordered = sorted(lines, key=lambda line: not line[2].endswith("&"))
        try:
            for doc, number, command in ordered:
                if command in SKIPPED:
                    skipped += 1
                    print(f"skip {doc}:{number}: {command}\n     ({SKIPPED[command]})")
                    continue
                for variant in variants(command):
                    if "P.json" in variant and not (Path(tmp) / "best.json").exists():
                        box.run(
                            box.concrete(
                                "placementctl optimize --graph G.json --devices TOPO.toml --budget 20 --out P.json"
                            )
                        )
                    concrete = box.concrete(variant)
                    print(f"run  {doc}:{number}: {variant}", flush=True)
                    started = time.monotonic()
                    error = box.run(concrete)
                    ran += 1
                    if error:
                        failures.append(f"{doc}:{number}: `{variant}` failed (ran as `{concrete}`):\n{error}")
                    print(f"     {'FAILED' if error else 'ok'} in {time.monotonic() - started:.1f} s", flush=True)
                    if error:  # here as well as in the summary: a log cut short keeps the line next to it
                        print(textwrap.indent(error, "     | "), flush=True)
        finally:
            box.close()
        for doc, number, text in toml_blocks(source):
            example = Path(tmp) / f"example_{number}.toml"
            example.write_text(text)
            ctl = build / "bin" / "placementctl"
            if "[[device]]" in text:
                check = f"{ctl} simulate --graph {Path(tmp) / 'G.json'} --devices {example}"
            else:
                check = f"{ctl} config check {example}"
            print(f"toml {doc}:{number}: {check}", flush=True)
            error = box.run(check)
            ran += 1
            if error:
                failures.append(f"{doc}:{number}: the TOML example is not valid on its own:\n{error}")
    print(f"\n{ran} command lines and TOML examples ran, {skipped} skipped with a reason, {len(failures)} failed")
    for f in failures:
        print("\n" + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

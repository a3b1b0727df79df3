"""`placementctl jobs show ID --plot F.svg` for a job that trained under a real placementd: the
picture holds what a reader needs (every stretch of steps, coloured by whether it ran the placement
in force or explored; the best-known line moving only where a trial decided; each verdict marked
where it was reached; a legend), and rsvg-convert renders it with those colours visible."""

import json
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest
import torch

import placement
from conftest import Mlp, batch, mse_to

SVG = "{http://www.w3.org/2000/svg}"


def placementctl(daemon, *args):
    result = subprocess.run(
        [os.environ["PLACEMENTCTL_BIN"], "--socket", daemon.socket, *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def trained_job(daemon):
    """A job that ran until at least one trial ended (and 150 steps), detached. Each job is bounded
    by 150 s: under a full parallel test run the daemon's policy steps come slowly, and 60 s once
    ended before the first trial did. The MLP's placements on two CPU devices are near-equal, so
    screening may rule out every candidate and end exploration with no trial (a full parallel run on
    2026-12-02 had none in 150 s): then a job of another graph (a Tanh more), explored afresh, tries
    again, up to three."""
    for attempt in range(3):
        torch.manual_seed(0)
        model = torch.nn.Sequential(Mlp(), *[torch.nn.Tanh() for _ in range(attempt)])
        job = placement.attach(
            f"py-plot-{attempt}",
            model,
            (batch(0)[0],),
            devices=["cpu:0", "cpu:1"],
            socket=daemon.socket,
            reconnect_interval_ms=100,
        )
        optimizer = torch.optim.Adam(job.parameters(), lr=1e-2)
        steps, deadline, shown = 0, time.monotonic() + 150, {}
        while steps < 150 or time.monotonic() < deadline:
            x, y = batch(steps)
            job.step((x,), mse_to(y), optimizer)
            steps += 1
            if steps >= 150 and steps % 50 == 0:
                shown = json.loads(placementctl(daemon, "--json", "jobs", "show", str(job.daemon()["session"])))
                if shown["trials"] or shown["exploration_finished"]:
                    break
        job.detach()
        if shown.get("trials"):
            break
    return job.daemon()["session"], steps


def x_of(line):
    return float(line.get("x1"))


def test_the_plot_shows_what_ran_when_and_where_trials_moved_the_best(daemon, tmp_path):
    session, steps = trained_job(daemon)
    info = json.loads(placementctl(daemon, "--json", "jobs", "show", str(session)))
    svg_path = tmp_path / "job.svg"
    out = placementctl(daemon, "jobs", "show", str(session), "--plot", str(svg_path))
    assert f"written to {svg_path}" in out
    root = ET.parse(svg_path).getroot()
    lines = list(root.iter(SVG + "line"))
    texts = [t.text for t in root.iter(SVG + "text")]

    # Every step the job ran is in one stretch, in order, each drawn as what it was.
    timeline = info["timeline"]
    assert sum(p["steps"] for p in timeline) == info["steps"] == steps
    stretches = [e for e in lines if e.get("class", "").startswith("stretch")]
    assert len(stretches) == len(timeline)
    # A long job's timeline halves its resolution past kMaxPoints: neighbours that ran different
    # placements become one point of placement 0, drawn as a merged stretch (CI's slower machine ran
    # that many steps before its first trial ended).
    kinds = set()
    for e, p in zip(stretches, timeline):
        kind = "merged" if p["placement"] == 0 else "in-force" if p["placement"] == p["best"] else "exploring"
        assert e.get("class") == f"stretch {kind}", (e.attrib, p)
        assert int(e.get("data-steps")) == p["steps"] and int(e.get("data-placement")) == p["placement"]
        kinds.add(kind)
    assert {"in-force", "exploring"} <= kinds or {"in-force", "merged"} <= kinds, kinds
    assert [x_of(e) for e in stretches] == sorted(x_of(e) for e in stretches)

    # Each trial's verdict at the step it was reached, labelled with the candidate.
    trials = info["trials"]
    assert trials, (f"exploration_finished={info['exploration_finished']}", info["candidates"])
    verdicts = [e for e in lines if e.get("class", "").startswith("verdict")]
    assert len(verdicts) == len(trials)
    for e, t in zip(verdicts, trials):
        assert (int(e.get("data-candidate")), int(e.get("data-step"))) == (t["candidate"], t["step"])
        assert e.get("class") == "verdict " + t["verdict"].replace(" ", "-")
    labels = [t.text for t in root.iter(SVG + "text") if t.get("class") == "verdict-label"]
    assert labels[0].startswith(f"{trials[0]['candidate']} "), labels
    # Step s sits at the same x in the stretches and the verdicts.
    step_x = {p["first_step"]: x_of(e) for e, p in zip(stretches, timeline)}
    for e in verdicts:
        if int(e.get("data-step")) in step_x:
            assert x_of(e) == pytest.approx(step_x[int(e.get("data-step"))], abs=0.11)

    # The best-known line is level except where a trial moved the placement in force.
    best = root.find(f".//{SVG}polyline[@class='best-known']")
    assert best is not None
    points = [tuple(map(float, p.split(","))) for p in best.get("points").split()]
    changes = [x for (x, y), (_, y_before) in zip(points[1:], points[:-1]) if y != y_before]
    verdict_x = [x_of(e) for e in verdicts]
    for x in changes:
        assert any(abs(x - v) <= 0.11 for v in verdict_x), (x, verdict_x)

    for label in ("step", "placement in force", "exploring (candidates, trials)", "best known", "start placement"):
        assert label in texts, texts

    # What a reader sees: rsvg-convert renders it, with the stretches' and the best line's colours.
    assert shutil.which("rsvg-convert"), "rsvg-convert (librsvg2-bin; scripts/install-deps.sh installs it)"
    png = tmp_path / "job.png"
    subprocess.run(["rsvg-convert", "-o", str(png), str(svg_path)], check=True, timeout=60)
    from PIL import Image

    pixels = Image.open(png).convert("RGB")
    assert pixels.size == (1000, 520)
    seen = set(pixels.get_flattened_data())
    assert (0x1F, 0x77, 0xB4) in seen, "no in-force pixel in the rendered plot"
    exploring, merged = (0xFF, 0x7F, 0x0E), (0x9A, 0x9A, 0x9A)
    if "merged" in kinds:  # short stretches of both kinds, 1.5 px wide, may only blend
        assert exploring in seen or merged in seen, "no exploring or merged pixel in the rendered plot"
    else:
        assert exploring in seen, "no exploring pixel in the rendered plot"
    assert (0x2C, 0xA0, 0x2C) in seen, "no best-known pixel in the rendered plot"

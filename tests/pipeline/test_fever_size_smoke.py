"""The FEVER-size benchmark end to end at tiny sizes (``python -m benchmarks.fever_size``): every
stage runs on make_fever data of the demo's words (the open first stage's vectors too), the Dask ones on a cluster of separate
processes it starts, and the report holds each stage's figures with their load averages, their
ratios to the first size, the scaling check, and that the Dask runs gave the one-machine bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.fever_size import STAGES, TITLES
from helpers import DEMO, ROOT


@pytest.mark.slow
def test_the_one_command_writes_every_table_at_tiny_sizes(tmp_path):
    out = tmp_path / "report.md"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.fever_size", "--sizes", "3000,6000", "--claim-scale",
                           "0.001", "--repeats", "1", "--requests", "5", "--source", DEMO / "evidence.json",
                           "--work", tmp_path, "--out", out], cwd=ROOT, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    assert "for cost (time, memory), not quality" in text and "failed" not in text
    for heading in ("## Every stage", "## Each stage's cost as a ratio to its cost at 3,000 sentences",
                    "## `factcheck run`, per stage of its timing list", "## `predict` and `serve`",
                    "## One machine and the Dask cluster: the same bytes?",
                    "## The open mode's first stage: static vectors and their nearest-neighbour index",
                    "## Scaling check and targets"):
        assert heading in text
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| ")}
    assert rows["linear (sentences x first)"] == "| linear (sentences x first) | 1.00 | 2.00 |"
    # the Dask cluster's index and predictions have the one-machine bytes at both sizes
    assert {"| 3,000 | yes | yes |", "| 6,000 | yes | yes |"} <= set(text.splitlines())
    assert text.count("gives the one-machine run's bytes: **met**") == 4
    figures = [line for line in text.splitlines() if line.startswith(tuple(f"| {TITLES[s]} | " for s in STAGES))]
    assert len(figures) == 2 * len(STAGES)  # a figures row and a ratios row a stage
    assert all(line.count("(load ") == 2 for line in figures[:len(STAGES)])
    assert all(line.split(" | ")[1].startswith("1.00 / ") for line in figures[len(STAGES):])
    assert "tagging the knowledge source" in text and "Every run's timing list named every stage: yes" in text
    assert text.count("(limit 1.2 x 2.00 = 2.40)") >= 2 * len(STAGES)
    # the open first stage: vectors built beside the tag index, searched exactly at this size (recall about 1:
    # exact search against exact search, the products summed in another order)
    assert text.count("| exact (under 100,000 passages) |") == 2
    raw = json.loads(out.with_suffix(".json").read_text())
    assert all(raw[n]["stages"]["open vectors"]["search"]["depths"][0]["recall"] >= 0.98 for n in raw)
    assert all(raw[n]["stages"]["open vectors"]["disk"]["vectors"] > 0 for n in raw)
    assert sorted(raw) == ["3000", "6000"] and set(raw["6000"]["stages"]) == set(STAGES)
    assert {"tag dask", "predict dask"} <= set(STAGES)
    # the data were made once each, with the record that lets the next invocation reuse them
    assert sorted(p.name for p in tmp_path.glob("fever-*")) == [
        "fever-3000-claims0.001", "fever-3000-claims0.001.args.json",
        "fever-6000-claims0.001", "fever-6000-claims0.001.args.json"]

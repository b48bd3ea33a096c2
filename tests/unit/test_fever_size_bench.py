"""The FEVER-size benchmark's bookkeeping (benchmarks/fever_size.py), in process: its data are
reused only when made with the same arguments, and a stage that fails is reported with its
exit status while the benchmark goes on (the commands themselves replaced by stand-ins)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks import fever_size
from factcheck.errors import InputError
from factcheck.formats.claims import explanations_path
from harness.measure import CommandFailed
from helpers import DEMO

SOURCE = DEMO / "evidence.json"
SEARCH = {"passages": 300, "dim": 256, "ann": "IVF64,PQ128x4fsr", "opened_s": 0.5, "claims": 20, "recall_claims": 20,
          "depths": [{"search_depth": 24, "candidates": 1024, "p50": 1.5, "p99": 2.5, "recall": 0.99,
                      "anon_mib": 1024, "file_mib": 2048},
                     {"search_depth": 12, "candidates": 1024, "p50": 0.8, "p99": 1.5, "recall": 0.95,
                      "anon_mib": 1024, "file_mib": 2048}]}


def args(**kw) -> argparse.Namespace:
    base = dict(sizes="300,600", claim_scale=0.001, repeats=1, requests=5, seed=fever_size.SEED, source=SOURCE,
                stages=None)
    return argparse.Namespace(**{**base, **kw})


def test_the_data_are_reused_only_when_made_with_the_same_arguments(tmp_path, monkeypatch):
    folder, written = fever_size.dataset(300, 0.001, 7, SOURCE, tmp_path)
    assert folder == tmp_path / "fever-300-claims0.001" and written["sentences"] == 300
    monkeypatch.setattr(fever_size.make_fever, "write", lambda *a, **k: pytest.fail("made again"))
    assert fever_size.dataset(300, 0.001, 7, SOURCE, tmp_path) == (folder, written)
    with pytest.raises(InputError) as exc:  # the same folder, another seed: refused, not reused
        fever_size.dataset(300, 0.001, 8, SOURCE, tmp_path)
    assert exc.value.param == "work" and "fever-300-claims0.001" in exc.value.one_line({"work": "--work"})
    (tmp_path / "fever-300-claims0.001.args.json").write_text("{not json")  # a record that says nothing
    with pytest.raises(InputError, match="remove it or choose another folder"):
        fever_size.dataset(300, 0.001, 7, SOURCE, tmp_path)


@pytest.mark.parametrize("argv, says", [
    (["--sizes", "300,1.2M"], "fever_size: --sizes: not a comma-separated list of numbers: '300,1.2M'"),
    (["--sizes", "300", "--claim-scale", "0.00001"], "fever_size: --claim-scale: 1e-05 gives no dev or test claims; "
                                                      "raise it"),
    (["--sizes", "300", "--repeats", "0"], "fever_size: --repeats: must be at least 1, got 0"),
])
def test_bad_arguments_stop_it_in_one_line_before_anything_is_measured(tmp_path, monkeypatch, capsys, argv, says):
    monkeypatch.setattr(fever_size, "bench_size", lambda *a: pytest.fail("measured"))
    out = tmp_path / "report.md"
    assert fever_size.main([*argv, "--source", str(SOURCE), "--work", str(tmp_path), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == says and not out.exists()


def write_outputs(cmd, dask_differs: bool = False) -> None:
    """What ``tag`` and ``predict`` write, as stand-ins: a manifest, or predictions and their explanations;
    with ``dask_differs``, a Dask run's bytes are not the one-machine run's."""
    out = Path(cmd[cmd.index("--out") + 1])
    text = b"on dask" if dask_differs and "dask" in cmd else b"the same"
    if cmd[3] == "tag" and "open" in cmd:  # the open mode's vectors and nearest-neighbour index
        (out / "vectors").mkdir(parents=True, exist_ok=True)
        (out / "vectors" / "vectors-00000.npy").write_bytes(b"v" * 3_000_000)
        (out / "vectors" / "ann.index").write_bytes(b"a" * 1_000_000)
    elif cmd[3] == "tag":
        out.mkdir(parents=True, exist_ok=True)
        (out / "manifest.json").write_bytes(text)
    elif cmd[3] == "predict":
        out.write_bytes(text)
        explanations_path(out).write_bytes(b"the same")


def fake_commands(monkeypatch, run_fails_at: int, dask_differs: bool = False):
    def measure_command(cmd, repeats, tree=None, prepare=None, single_over=None, alongside=None):
        if cmd[3] == "tag" and "fever-600" in str(cmd[4]):
            raise CommandFailed(cmd, -9, "tagging ...\nKilled\n")
        write_outputs(cmd, dask_differs)
        return {"wall_s": 2.0, "cpu_s": 3.0, "tree_peak_rss": 2 ** 30, "tree_peak_pss": 6e8, "tree_peak_anon": 2e8,
                "runs": [2.0], "loads": [[1.0, 1.5]]}

    def trace_runs(data, repeats, keep, scratch=None, single_over=None):
        if str(run_fails_at) in data.name:
            raise CommandFailed(["factcheck", "run"], 1, "factcheck: MemoryError\n")
        return {"wall_s": 10.0, "cpu_s": 12.0, "peak_rss": 2 ** 31, "timings_complete": True,
                "stages": {"tagging the knowledge source": {"wall_s": 4.0, "cpu_s": 5.0, "peak_rss": 2 ** 30}},
                "runs": [{"wall_s": 10.0, "cpu_s": 12.0, "peak_rss": 2 ** 31, "load": [1.0, 2.0]}]}

    def bench_serve(run, requests, repeats):
        return {"startup_s": 1.0, "rss_start_mib": 100, "rss_end_mib": 120, "anon_end_mib": 80, "file_end_mib": 40,
                "p50": 5.0, "p99": 9.0, "errors": 0, "best": "bm25"}

    def measure(cmd, log=None, **kw):  # the open first stage's search, in a process of its own
        assert cmd[1:3] == ["-m", "benchmarks.ann"] and "--search" in cmd
        Path(log).write_text("loading\n" + json.dumps(SEARCH) + "\n")
        return {"wall_s": 9.0, "cpu_s": 9.0, "tree_peak_rss": 3e9, "tree_peak_anon": 1e9}

    def same_index(manifest, index):  # the manifest's bytes only: the stand-in index has no files to verify
        return "yes" if (index / "manifest.json").read_bytes() == manifest else "no: manifest.json differs"

    for name, fn in (("measure_command", measure_command), ("trace_runs", trace_runs), ("bench_serve", bench_serve),
                     ("same_index", same_index), ("measure", measure)):
        monkeypatch.setattr(fever_size, name, fn)


def test_a_failed_stage_is_reported_with_its_status_and_the_benchmark_goes_on(tmp_path, monkeypatch):
    fake_commands(monkeypatch, run_fails_at=600)
    a = args()
    results = {str(n): fever_size.bench_size(n, *fever_size.dataset(n, 0.001, a.seed, SOURCE, tmp_path), a, tmp_path)
               for n in (300, 600)}
    first, second = results["300"]["stages"], results["600"]["stages"]
    assert all("failed" not in first[s] for s in fever_size.STAGES)
    assert first["open vectors"]["disk"] == {"vectors": 3_000_000, "ann": 1_000_000}
    assert second["tag"]["failed"] == "status -9 (killed by signal 9)" and second["tag"]["error"] == "Killed"
    assert second["retrieve bm25"] == {"failed": "not run: tag failed"}  # it needs the tag index
    assert second["run"]["failed"] == "status 1" and second["run"]["error"] == "factcheck: MemoryError"
    assert second["predict dev"] == second["serve"] == {"failed": "not run: run failed"}
    assert second["tag dask"] == second["open vectors"] == {"failed": "not run: tag failed"}
    assert second["predict dask"] == {"failed": "not run: predict dev failed"}
    text = "\n".join(fever_size.report(a, results, (1.0, 1.0, 1.0), (2.0, 2.0, 2.0)))
    assert "failed: status -9 (killed by signal 9) (Killed)" in text and "not run: run failed" in text
    assert "| **whole run** | **10 / 12 / 2,048** | failed (status 1) |" in text
    assert "- `factcheck tag` (wiki-pages, `--jobs 2`), 300 -> 600: **failed** (no figure at both sizes)" in text
    # the first size's figures, each with its load, and as ratios to themselves
    assert "| `factcheck tag` (wiki-pages, `--jobs 2`) | 2.0 / 3.0 / 1,024 (load 1.0→1.5) |" in text
    assert "| linear (sentences x first) | 1.00 | 2.00 |" in text
    assert "not quality" in text
    # the open first stage: the build, its disk, the search's figures
    assert "| 300 | 2.0 / 3.0 / 1.07 (0.20) (load 1.0→1.5) | 0.00 + 0.00 | `IVF64,PQ128x4fsr` | 0.5 | 1.07 + 2.15 (load " in text
    assert "| 600 | failed: not run: tag failed | | | | |" in text
    assert "| 300 | **24** / 1,024 | 1.50 | 2.50 | 0.9900 |\n| 300 | 12 / 1,024 | 0.80 | 1.50 | 0.9500 |" in text
    # predict's peak three ways, each labelled: summed RSS (the target's figure), summed PSS, summed anonymous
    assert "| peak GB: summed RSS | summed PSS | summed anonymous |" in text
    assert "| 300 | 20 | 10.0 | 1.07 | 0.60 | 0.20 | 1.0 |" in text
    assert "| 600 | failed | | | | | failed: not run: run failed |" in text
    assert "| 300 | yes | yes |" in text
    assert "| 600 | – (not run: tag failed) | – (not run: predict dev failed) |" in text


def test_dask_output_that_differs_is_reported_loudly_and_every_figure_kept(tmp_path, monkeypatch):
    fake_commands(monkeypatch, run_fails_at=-1, dask_differs=True)
    a = args()
    results = {"300": fever_size.bench_size(300, *fever_size.dataset(300, 0.001, a.seed, SOURCE, tmp_path), a, tmp_path)}
    assert all("failed" not in m for m in results["300"]["stages"].values())
    text = "\n".join(fever_size.report(a, results, (1.0, 1.0, 1.0), (2.0, 2.0, 2.0)))
    assert "| 300 | **no** (manifest.json differs) | **no** (out-dask.jsonl differs) |" in text
    assert ("- `factcheck tag` on a Dask cluster (2 workers, by address) at 300 gives the one-machine run's bytes "
            "(manifest.json differs): **missed**") in text
    assert "| `factcheck tag` on a Dask cluster (2 workers, by address) | 2.0 / 3.0 / 1,024 (load 1.0→1.5) |" in text


def test_every_stage_has_its_ratio_to_the_first_size(tmp_path, monkeypatch):
    fake_commands(monkeypatch, run_fails_at=-1)
    monkeypatch.setattr(fever_size, "measure_command", lambda cmd, repeats, **kw: write_outputs(cmd) or {
        "wall_s": 2.0 * (1 + ("fever-600" in " ".join(map(str, cmd)))), "cpu_s": 3.0, "tree_peak_rss": 2 ** 30,
        "runs": [2.0], "loads": [[1.0, 1.5]]})
    a = args()
    results = {str(n): fever_size.bench_size(n, *fever_size.dataset(n, 0.001, a.seed, SOURCE, tmp_path), a, tmp_path)
               for n in (300, 600)}
    text = "\n".join(fever_size.report(a, results, (1.0, 1.0, 1.0), (2.0, 2.0, 2.0)))
    assert "| `factcheck tag` (wiki-pages, `--jobs 2`) | 1.00 / 1.00 / 1.00 | 2.00 / 1.00 / 1.00 |" in text
    assert "| `serve --run` start-up (peak: RSS after the requests) | 1.00 / – / 1.00 | 1.00 / – / 1.00 |" in text
    assert "- `factcheck tag` (wiki-pages, `--jobs 2`) time, 300 -> 600: x2.00 (limit 1.2 x 2.00 = 2.40): **met**" in text
    assert "| tagging the knowledge source | 1.00 / 1.00 | 1.00 / 1.00 |" in text  # the run's own stages too


def test_a_report_written_mid_invocation_names_the_sizes_not_measured_yet(tmp_path, monkeypatch):
    fake_commands(monkeypatch, run_fails_at=-1)
    a = args()
    results = {"300": fever_size.bench_size(300, *fever_size.dataset(300, 0.001, a.seed, SOURCE, tmp_path), a, tmp_path)}
    partial = "\n".join(fever_size.report(a, results, (1.0, 1.0, 1.0), (2.0, 2.0, 2.0), pending=[600, 1200]))
    assert "**Written while the invocation was still running**: not measured yet at 600, 1,200 sentences." in partial
    whole = "\n".join(fever_size.report(a, results, (1.0, 1.0, 1.0), (2.0, 2.0, 2.0)))
    assert "still running" not in whole


def test_an_invocation_stopped_part_way_through_a_size_keeps_every_stage_it_measured(tmp_path, monkeypatch):
    fake_commands(monkeypatch, run_fails_at=-1)
    monkeypatch.setattr(fever_size, "measure_command", lambda cmd, repeats, **kw: write_outputs(cmd) or {
        "wall_s": 2.0, "cpu_s": 3.0, "tree_peak_rss": 2 ** 30, "runs": [2.0], "loads": [[1.0, 1.5]]})

    def stopped(*a, **k):  # Ctrl-C (or the end of a session) during the whole run at the second size
        raise KeyboardInterrupt
    measured = []
    real = fever_size.trace_runs
    monkeypatch.setattr(fever_size, "trace_runs", lambda data, *a, **k: stopped() if "600" in data.name
                        else measured.append(data) or real(data, *a, **k))
    out = tmp_path / "report.md"
    with pytest.raises(KeyboardInterrupt):
        fever_size.main(["--sizes", "300,600", "--claim-scale", "0.001", "--repeats", "1", "--source", str(SOURCE),
                         "--work", str(tmp_path), "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    assert measured and "**Written while the invocation was still running**: not measured yet at 600 sentences." in text
    tag = "| `factcheck tag` (wiki-pages, `--jobs 2`) | 2.0 / 3.0 / 1,024 (load 1.0→1.5) | 2.0 / 3.0 / 1,024"
    assert tag in text  # the second size's first two stages are kept
    assert f"| `factcheck run --data-dir` (whole run) | 10.0 / 12.0 / 2,048 (load 1.0→2.0) | failed: {fever_size.PENDING} |" in text
    saved = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert saved["600"]["stages"]["retrieve bm25"]["wall_s"] == 2.0
    assert saved["600"]["stages"]["predict dask"] == {"failed": fever_size.PENDING}


def test_the_open_first_stage_is_held_to_its_targets_at_25m(tmp_path, monkeypatch):
    fake_commands(monkeypatch, run_fails_at=-1)
    a = args(sizes="300")
    r = fever_size.bench_size(300, *fever_size.dataset(300, 0.001, a.seed, SOURCE, tmp_path), a, tmp_path)
    r["n"] = 25_000_000
    opened = r["stages"]["open vectors"]
    opened["wall_s"], opened["search"]["depths"][0]["p50"], opened["tree_peak_rss"] = 29 * 60, 12.5, 17e9
    text = "\n".join(fever_size.checks({"25000000": r}))
    assert "- the open first stage at 25,000,000: vectors and index built in 29.0 min (<= 30): **met**" in text
    assert ("- the open first stage at 25,000,000: search p50 12.50 ms at the default depth (<= 10; recall@100 "
            "0.9900 against exact): **missed**") in text
    assert ("- the open first stage at 25,000,000: build peak 17.00 GB summed RSS, search 3.22 GB resident (<= 16): "
            "**missed**") in text


def test_stages_measures_only_those_and_keeps_the_others_figures(tmp_path, monkeypatch):
    fake_commands(monkeypatch, run_fails_at=-1)
    out = tmp_path / "report.md"
    argv = ["--sizes", "300", "--claim-scale", "0.001", "--repeats", "1", "--source", str(SOURCE), "--work",
            str(tmp_path), "--out", str(out)]
    assert fever_size.main(argv) == 0
    first = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))["300"]["stages"]
    assert "Measured by more than one invocation" not in out.read_text(encoding="utf-8")
    commands = []

    def measure_command(cmd, repeats, **kw):  # slower now: the figures say which run they come from
        commands.append((cmd[3], repeats))
        write_outputs(cmd)
        return {"wall_s": 5.0, "cpu_s": 6.0, "tree_peak_rss": 2 ** 30, "runs": [5.0], "loads": [[1.0, 1.5]]}
    monkeypatch.setattr(fever_size, "measure_command", measure_command)
    monkeypatch.setattr(fever_size, "trace_runs", lambda *a, **k: pytest.fail("the run is not needed"))
    assert fever_size.main([*argv, "--stages", "open-vectors", "--repeats", "3"]) == 0
    assert commands == [("tag", 1), ("tag", 3)]  # the index it needs, once; then the stage asked for
    again = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))["300"]["stages"]
    assert again["open vectors"]["wall_s"] == 5.0 and "--stages open-vectors" in again["open vectors"]["by"]
    assert {k: v for k, v in again.items() if k != "open vectors"} == {k: v for k, v in first.items()
                                                                       if k != "open vectors"}
    assert again["tag"]["wall_s"] == 2.0  # kept, not the prerequisite's run
    text = out.read_text(encoding="utf-8")
    assert "**Measured by more than one invocation**" in text
    assert "--stages open-vectors` (" in text and ": open-vectors at 300" in text and "; predict-dask at 300" in text


@pytest.mark.parametrize("stages, says", [
    ("open-vectors,tagging", "fever_size: --stages: unknown stage 'tagging' (the stages: tag, retrieve-bm25, "
                             "open-vectors, run, predict-dev, serve, tag-dask, predict-dask)"),
    ("run", "report.json: --stages keeps the other stages from this file, which cannot be read (FileNotFoundError); "
            "run every stage once first"),
])
def test_stages_without_what_it_needs_stops_in_one_line(tmp_path, monkeypatch, capsys, stages, says):
    monkeypatch.setattr(fever_size, "bench_size", lambda *a, **k: pytest.fail("measured"))
    out = tmp_path / "report.md"
    assert fever_size.main(["--sizes", "300", "--claim-scale", "0.001", "--source", str(SOURCE), "--work",
                            str(tmp_path), "--out", str(out), "--stages", stages]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith(says) and not out.exists()


def test_every_stage_lists_every_stage_whose_output_it_reads():
    # a stage run alone runs exactly what NEEDS lists for it, so a need's own needs are listed too
    for name, needs in fever_size.NEEDS.items():
        assert set(needs) <= set(fever_size.STAGES) and name not in needs
        for need in needs:
            assert set(fever_size.NEEDS.get(need, ())) <= set(needs), (name, need)

"""The demo run's course-mode predictions against a frozen copy.

`tests/data/frozen-demo/` holds the dev and test predictions of `factcheck run --data-dir
data/demo` as commit d18b6f9 wrote them, before the index format, the scoring core and the
readers were replaced. A change that moves them on purpose (rounding, one implementation
in place of two) must say so: update the frozen files in the same commit, with the paired
dev comparison on the real data (`python -m scripts.compare_runs`) in `docs/decisions.md`.
"""

from __future__ import annotations

import json

import pytest

from helpers import ROOT

FROZEN = ROOT / "tests" / "data" / "frozen-demo"


@pytest.mark.parametrize("name", ["dev-claims-predictions.json", "test-claims-predictions.json"])
def test_demo_predictions_are_the_frozen_ones(demo_run, name):
    frozen, now = (FROZEN / name).read_bytes(), (demo_run / name).read_bytes()
    if now != frozen:
        old, new = json.loads(frozen), json.loads(now)
        moved = sorted(c for c in old.keys() | new.keys() if old.get(c) != new.get(c))
        pytest.fail(f"{name}: {len(moved)} claims' predictions moved ({', '.join(moved[:5])}); see this module's docstring")



@pytest.mark.parametrize("setting", ["0", "1"])
def test_demo_predictions_with_and_without_the_compiled_ranking(tmp_path, setting):
    """The same frozen predictions ranked on the product path (``FACTCHECK_NUMBA=0``) and by the
    compiled loop from the first query (``1``; skipped without numba)."""
    from factcheck.scoring import matrix
    from helpers import make_run
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(matrix.VARIABLE, setting)
        if setting == "1" and not matrix.compiled_available():
            pytest.skip("needs numba (pip install -e '.[fast]')")
        make_run(tmp_path / "run")
    for name in ("dev-claims-predictions.json", "test-claims-predictions.json"):
        assert (tmp_path / "run" / name).read_bytes() == (FROZEN / name).read_bytes(), name

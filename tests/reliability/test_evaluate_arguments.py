"""Python evaluate's other arguments: a generator of claims is read once (it was used up by
the argument check, and every prediction reported as unknown), and a wrong type for
``labels`` or ``explanations`` is an error naming the parameter, not a traceback from
inside or letters scored as labels."""

from __future__ import annotations

import pytest

import factcheck
from helpers import DEMO
from factcheck.evaluation.evaluate import evaluate


@pytest.fixture(scope="module")
def dev():
    return factcheck.read_claims(DEMO / "dev-claims.json", require_labels=True)


def _predictions(dev):
    return {c.id: {"evidences": c.evidences[:1], "claim_label": c.label} for c in dev}


def test_a_generator_of_claims_scores_as_its_list(dev):
    assert evaluate(_predictions(dev), (c for c in dev)).metrics == evaluate(_predictions(dev), dev).metrics


@pytest.mark.parametrize("labels", ["SUPPORTS", "REFUTES"])
def test_a_string_for_labels_is_refused(dev, labels):
    with pytest.raises(TypeError, match="^labels: expected a sequence"):
        evaluate(_predictions(dev), dev, labels=labels)


@pytest.mark.parametrize("explanations, where", [([1], "explanations: expected a dict"),
                                                  ({"claim-d1": 1}, "explanations: claim 'claim-d1'")])
def test_a_wrong_type_for_explanations_names_the_parameter(dev, explanations, where):
    with pytest.raises(TypeError, match=f"^{where}"):
        evaluate(_predictions(dev), dev, explanations=explanations)

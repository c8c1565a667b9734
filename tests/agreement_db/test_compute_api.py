"""POST /api/v1/agreement/compute: published worked examples to three decimals, degenerate data,
422 on bad parameters, authentication."""
from __future__ import annotations

import numpy as np
import pytest
from irrCAC.datasets import raw_4raters
from nltk.metrics.agreement import AnnotationTask
from nltk.metrics.distance import masi_distance
from sklearn.metrics import cohen_kappa_score
from sqlmodel import Session

from tests.agreement.test_published import FLEISS_TABLE, KRIPP_UNITS
from tests.annotations.factories import make_user

URL = "/api/v1/agreement/compute"


@pytest.fixture
def headers(engine, token_for):
    with Session(engine) as s:
        make_user(s, "calc", password=None)  # a plain annotator may use the calculator
        s.commit()
    return token_for("calc")


def post(client, headers, **body):
    body.setdefault("n_boot", 0)
    return client.post(URL, json=body, headers=headers)


KRIPPENDORFF_2011 = [  # level, categories, published alpha
    ("nominal", None, 0.743),
    ("ordinal", [1, 2, 3, 4, 5], 0.815),
    ("interval", None, 0.849),
    ("ratio", None, 0.797),
]


def test_published_examples(client, headers):
    for level, categories, published in KRIPPENDORFF_2011:
        body = {"coefficient": "krippendorff_alpha", "level": level, "ratings": KRIPP_UNITS}
        if categories:
            body["categories"] = categories
        r = post(client, headers, **body)
        assert r.status_code == 200, r.text
        out = r.json()
        assert round(out["value"], 3) == published, level
        assert out["n_units"] == 11 and out["ci"] is None and "reason" not in out

    ratings = [[c + 1 for c, n in enumerate(row) for _ in range(n)] for row in FLEISS_TABLE]
    out = post(client, headers, coefficient="fleiss_kappa", ratings=ratings).json()
    assert round(out["value"], 3) == 0.210 and out["n_units"] == 10

    pairs = [["yes", "yes"]] * 20 + [["yes", "no"]] * 5 + [["no", "yes"]] * 10 + [["no", "no"]] * 15
    out = post(client, headers, coefficient="cohen_kappa", ratings=pairs, n_boot=50, seed=4).json()
    assert round(out["value"], 3) == 0.400 and out["n_units"] == 50
    lo, hi = out["ci"]
    assert lo < 0.4 < hi and -1 <= lo and hi <= 1
    assert post(client, headers, coefficient="cohen_kappa", ratings=pairs, n_boot=50, seed=4).json() == out

    ratings = [[None if np.isnan(x) else x for x in row] for row in raw_4raters().to_numpy().tolist()]
    out = post(client, headers, coefficient="gwet_ac1", ratings=ratings).json()
    assert round(out["value"], 3) == 0.775  # irrCAC documents 0.77544


def test_weighted_kappa_and_set_valued_alpha(client, headers):
    # linear weights on the category positions a < b < c, against scikit-learn
    ratings = [["a", "a"], ["a", "b"], ["b", "b"], ["b", "c"], ["c", "c"], ["c", "a"], ["a", "a"]]
    out = post(client, headers, coefficient="cohen_kappa", weights="linear", categories=["a", "b", "c"],
               ratings=ratings).json()
    want = cohen_kappa_score([x for x, _ in ratings], [y for _, y in ratings], weights="linear")
    assert out["value"] == pytest.approx(want) and out["value"] != pytest.approx(
        cohen_kappa_score([x for x, _ in ratings], [y for _, y in ratings]))
    # MASI alpha on sets, against nltk's AnnotationTask
    sets = [[["x"], ["x"], ["x", "y"]], [["y"], ["y"], ["y"]], [["x", "y"], ["x"], ["y"]], [["z"], ["z"], ["x"]]]
    out = post(client, headers, coefficient="krippendorff_alpha", distance="masi", ratings=sets).json()
    task = AnnotationTask(data=[(f"c{r}", f"u{u}", frozenset(cell)) for u, row in enumerate(sets)
                                for r, cell in enumerate(row)], distance=masi_distance)
    assert out["value"] == pytest.approx(task.alpha())
    assert out["n_units"] == 4


def test_degenerate_value_null_with_reason(client, headers):
    cases = [
        ({"coefficient": "fleiss_kappa", "ratings": [["a", "a"], ["a", "a"]]}, "variation"),
        ({"coefficient": "krippendorff_alpha", "ratings": [[1, 1], [1, None]]}, "variation"),
        ({"coefficient": "cohen_kappa", "ratings": [[1], [2]]}, "single rater"),
        ({"coefficient": "percent", "ratings": [[1, None], [None, 2]]}, "no pairable unit"),
        ({"coefficient": "gwet_ac1", "ratings": []}, "no ratings"),
    ]
    for body, reason in cases:
        r = post(client, headers, n_boot=20, **body)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["value"] is None and reason in out["reason"], (body, out)
        assert out["ci"] is None
    # percent stays defined without variation
    assert post(client, headers, coefficient="percent", ratings=[["a", "a"], ["a", "a"]]).json()["value"] == 1.0


def test_bad_parameters_are_422_naming_the_field(client, headers):
    ok = {"coefficient": "fleiss_kappa", "ratings": [[1, 2], [2, 2]]}
    cases = [
        ({**ok, "coefficient": "scotts_pi"}, "coefficient"),
        ({**ok, "level": "ordinal"}, "level"),                      # level is for alpha only
        ({**ok, "weights": "linear"}, "weights"),                   # weights are for Cohen only
        ({**ok, "distance": "masi"}, "distance"),
        ({**ok, "coefficient": "krippendorff_alpha", "level": "fuzzy"}, "level"),
        ({**ok, "categories": [1]}, "ratings[0][1]"),               # 2 is not a listed category
        ({**ok, "ratings": [[1, {"a": 1}]]}, "ratings[0][1]"),
        ({**ok, "ratings": [1, 2]}, "ratings[0]"),
        ({**ok, "n_boot": -3}, "n_boot"),
        ({**ok, "confidence": 1.5}, "confidence"),
        ({**ok, "colour": "red"}, "colour"),
        ({"ratings": [[1, 2]]}, "coefficient"),
    ]
    for body, field in cases:
        r = client.post(URL, json=body, headers=headers)
        assert r.status_code == 422, (body, r.text)
        detail = r.json()["detail"]
        assert isinstance(detail, str) and detail.startswith(field), (body, detail)

    # any authenticated user, nobody else
    assert client.post(URL, json={"coefficient": "percent", "ratings": [[1, 1]]}).status_code == 401

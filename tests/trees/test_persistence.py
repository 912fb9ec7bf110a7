"""Versioned JSON persistence (specs/trees.md "Persistence"): round trips and strict loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import DecodeError, ParameterError
from securetrees.protocols.histogram_forest.testing import fit_parts
from securetrees.trees import (
    BoostedForest,
    Forest,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
    Tree,
    dumps,
    load,
    loads,
    save,
)


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    X[:, 2] = rng.integers(0, 4, size=150)
    X[rng.random((150, 3)) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + (X[:, 2] == 1) > 0.3).astype(int) + (np.nan_to_num(X[:, 1]) > 1)
    return X, y


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    X, y = _data()
    kw = {"categorical_features": [2]}
    rf = RandomForestClassifier(3, max_depth=4, random_state=0, **kw).fit(X, y * 10).model_
    return {
        "rf": rf,
        "rfr": RandomForestRegressor(2, max_depth=3, random_state=0, **kw).fit(X, y * 0.5).model_,
        "gb": GradientBoostingClassifier(3, max_depth=3, **kw).fit(X, y).model_,
        "gb2": GradientBoostingClassifier(2, max_depth=2, **kw).fit(X, y > 0).model_,
        "gbr": GradientBoostingRegressor(2, max_depth=2, **kw).fit(X, y * 1.5).model_,
        "hist": _histogram_forest(X, y),
    } | {"rf-str": Forest(rf.trees, "classification", np.array(["high", "low", "mid"]))}


def _histogram_forest(X: np.ndarray, y: np.ndarray) -> Forest:
    """A horizontal model: its splits name no provider (every client holds every feature)."""
    from securetrees.protocols.histogram_forest import HistogramForestClassifier

    half = len(y) // 2
    Xf = np.nan_to_num(X)
    model = HistogramForestClassifier(n_estimators=2, max_depth=3, random_state=0)
    fit_parts(model, [(Xf[:half], y[:half]), (Xf[half:], y[half:])])
    forest: Forest = model.forest_
    assert np.all(forest.trees[0].provider == -1)
    return forest


def test_round_trips(models: dict[str, Any], tmp_path: Path) -> None:
    X, _ = _data()
    for name, m in models.items():
        back = loads(dumps(m))
        assert type(back) is type(m)
        np.testing.assert_array_equal(back.predict(X), m.predict(X))
        if isinstance(m, (Forest, BoostedForest)) and m.classes is not None:
            np.testing.assert_array_equal(back.predict_proba(X), m.predict_proba(X))
            assert back.classes.dtype == m.classes.dtype
        for a, b in zip(m.trees, back.trees, strict=True):
            assert a.same_as(b)
        save(m, tmp_path / f"{name}.json")
        assert dumps(load(tmp_path / f"{name}.json")) == dumps(m)


def test_single_and_partial_trees_round_trip(models: dict[str, Any]) -> None:
    full: Tree = models["rf"].trees[0]
    for t in (full, full.partial(0), full.partial(5)):
        back = loads(dumps(t))
        assert isinstance(back, Tree) and back.same_as(t)
    forest = models["rf"].partial(0)
    assert loads(dumps(forest)).trees[0].withheld.all() == forest.trees[0].withheld.all()


def _doc(models: dict[str, Any], name: str = "rf") -> dict[str, Any]:
    return json.loads(dumps(models[name]))


MUTATIONS = {
    "version": lambda d: d.update(version=2),
    "format": lambda d: d.update(format="pickle"),
    "kind": lambda d: d.update(kind="svm"),
    "extra-key": lambda d: d.update(extra=1),
    "task": lambda d: d.update(task="ranking"),
    "classes-one": lambda d: d["classes"].update(values=[1]),
    "classes-order": lambda d: d["classes"].update(values=[20, 10, 0]),
    "classes-dtype": lambda d: d["classes"].update(dtype="str"),
    "classes-dtype-other": lambda d: d["classes"].update(dtype="object"),
    "withheld-without-provider": lambda d: (d["trees"][0]["nodes"]["withheld"].__setitem__(0, True),
                                            d["trees"][0]["nodes"]["feature"].__setitem__(0, -1),
                                            d["trees"][0]["nodes"]["threshold"].__setitem__(0, None),
                                            d["trees"][0]["nodes"]["categorical"].__setitem__(0, False),
                                            d["trees"][0]["nodes"]["missing_left"].__setitem__(0, False),
                                            d["trees"][0]["nodes"]["provider"].__setitem__(0, -1)),
    "no-trees": lambda d: d.update(trees=[]),
    "left-cycle": lambda d: d["trees"][0]["nodes"]["left"].__setitem__(0, 0),
    "left-range": lambda d: d["trees"][0]["nodes"]["left"].__setitem__(0, 10_000),
    "one-child": lambda d: d["trees"][0]["nodes"]["right"].__setitem__(0, -1),
    "feature-range": lambda d: d["trees"][0]["nodes"]["feature"].__setitem__(0, 99),
    "feature-bool": lambda d: d["trees"][0]["nodes"]["feature"].__setitem__(0, True),
    "threshold-str": lambda d: d["trees"][0]["nodes"]["threshold"].__setitem__(0, "1.0"),
    "threshold-null": lambda d: d["trees"][0]["nodes"]["threshold"].__setitem__(0, None),
    "short-list": lambda d: d["trees"][0]["nodes"]["weight"].pop(),
    "negative-weight": lambda d: d["trees"][0]["nodes"]["weight"].__setitem__(0, -1.0),
    "bool-int": lambda d: d["trees"][0]["nodes"]["categorical"].__setitem__(0, 1),
    "leaf-null-value": lambda d: d["trees"][0]["nodes"]["value"].__setitem__(
        d["trees"][0]["nodes"]["left"].index(-1), [None, 1.0, 1.0]),
    "value-width": lambda d: d["trees"][0]["nodes"]["value"].__setitem__(0, [1.0]),
    "n-outputs": lambda d: d["trees"][0].update(n_outputs=2),
    "missing-nodes": lambda d: d["trees"][0].pop("nodes"),
    "withheld-with-feature": lambda d: d["trees"][0]["nodes"]["withheld"].__setitem__(0, True),
    "leaf-provider": lambda d: d["trees"][0]["nodes"]["provider"].__setitem__(
        d["trees"][0]["nodes"]["left"].index(-1), 0),
}


def test_string_classes_are_checked(models: dict[str, Any]) -> None:
    d = _doc(models, "rf-str")
    assert d["classes"] == {"dtype": "str", "values": ["high", "low", "mid"]}
    for bad in (["high", 1, "mid"], ["mid", "low", "high"], ["low"]):
        d["classes"]["values"] = bad
        with pytest.raises(DecodeError):
            loads(json.dumps(d))
    mixed = Forest(models["rf"].trees, "classification", np.array([b"a", b"b", b"c"], dtype=object))
    with pytest.raises(ParameterError, match="cannot be saved"):
        dumps(mixed)


def test_withheld_control_is_valid(models: dict[str, Any]) -> None:
    """The withheld-node mutation below differs from a valid partial tree only by its provider."""
    d = _doc(models)
    MUTATIONS["withheld-without-provider"](d)
    d["trees"][0]["nodes"]["provider"][0] = 0
    assert isinstance(loads(json.dumps(d)), Forest)


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_malformed_documents_rejected(models: dict[str, Any], name: str) -> None:
    d = _doc(models)
    MUTATIONS[name](d)
    with pytest.raises(DecodeError):
        loads(json.dumps(d))


@pytest.mark.parametrize("text", ["", "[]", "{", '{"format": "securetrees.trees"}', "NaN",
                                  b"\xff\xfe", '{"format":"securetrees.trees","version":true}'])
def test_garbage_rejected(text: str | bytes) -> None:
    with pytest.raises(DecodeError):
        loads(text)


def test_boosted_fields_checked(models: dict[str, Any]) -> None:
    for mutate in (lambda d: d.update(learning_rate=0), lambda d: d.update(base_score=[1.0, 2.0]),
                   lambda d: d.update(loss="hinge"), lambda d: d.update(classes=None)):
        d = _doc(models, "gb")
        mutate(d)
        with pytest.raises(DecodeError):
            loads(json.dumps(d))


@given(st.data())
def test_fuzzed_documents_decode_or_raise_decode_error(data: st.DataObject) -> None:
    """Any single-field corruption either still describes a valid model or raises DecodeError."""
    X, y = _data()
    model = RandomForestClassifier(1, max_depth=2, random_state=0).fit(X, y).model_
    d = json.loads(dumps(model))
    nodes = d["trees"][0]["nodes"]
    key = data.draw(st.sampled_from(sorted(nodes)))
    i = data.draw(st.integers(0, len(nodes[key]) - 1))
    nodes[key][i] = data.draw(st.one_of(st.none(), st.booleans(), st.integers(-3, 30),
                                        st.floats(allow_nan=False), st.text(max_size=3),
                                        st.lists(st.integers(), max_size=3)))
    try:
        back = loads(json.dumps(d))
    except DecodeError:
        return
    back.predict(X)


def test_dumps_rejects_other_objects() -> None:
    with pytest.raises(ParameterError):
        dumps("forest")  # type: ignore[arg-type]

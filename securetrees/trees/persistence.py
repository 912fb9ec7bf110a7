"""Versioned JSON persistence of trees and forests (never pickle).

Spec: ``specs/trees.md`` section "Persistence".  A document is
``{"format": "securetrees.trees", "version": 1, "kind": "tree" | "forest" | "boosted", ...}``.
Floats are JSON numbers (exact round trip); a withheld or undefined float is
``null``; the threshold ``+inf`` is the string ``"+inf"``.  :func:`loads`
checks every field, type, length, range and the tree shape (each non-root node
has exactly one parent, with a smaller id) and raises
:class:`~securetrees.errors.DecodeError` on anything else.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from securetrees.errors import DecodeError, ParameterError
from securetrees.trees.forest import LOSSES, TASKS, BoostedForest, Forest
from securetrees.trees.tree import Tree

__all__ = ["FORMAT", "VERSION", "dumps", "load", "loads", "save"]

FORMAT = "securetrees.trees"
VERSION = 1
Model = Tree | Forest | BoostedForest
_TREE_KEYS = {"n_features", "n_outputs", "nodes"}
_NODE_KEYS = {"left", "right", "feature", "threshold", "categorical", "missing_left",
              "provider", "withheld", "weight", "value"}


def _float_out(v: float) -> float | str | None:
    if math.isnan(v):
        return None
    if v == math.inf:
        return "+inf"
    return float(v)


def _tree_doc(t: Tree) -> dict[str, Any]:
    return {
        "n_features": t.n_features,
        "n_outputs": t.n_outputs,
        "nodes": {
            "left": t.left.tolist(),
            "right": t.right.tolist(),
            "feature": t.feature.tolist(),
            "threshold": [_float_out(v) for v in t.threshold.tolist()],
            "categorical": t.categorical.tolist(),
            "missing_left": t.missing_left.tolist(),
            "provider": t.provider.tolist(),
            "withheld": t.withheld.tolist(),
            "weight": t.weight.tolist(),
            "value": [[_float_out(v) for v in row] for row in t.value.tolist()],
        },
    }


def _classes_doc(classes: np.ndarray[Any, Any] | None) -> dict[str, Any] | None:
    if classes is None:
        return None
    if classes.dtype == np.bool_:
        return {"dtype": "bool", "values": classes.tolist()}
    if np.issubdtype(classes.dtype, np.integer):
        return {"dtype": "int", "values": classes.tolist()}
    if np.issubdtype(classes.dtype, np.floating):
        return {"dtype": "float", "values": classes.tolist()}
    if all(isinstance(c, str) for c in classes.tolist()):
        return {"dtype": "str", "values": classes.tolist()}
    raise ParameterError(f"classes of dtype {classes.dtype} cannot be saved: labels must be booleans, "
                         "integers, floats or strings")


def dumps(model: Model) -> str:
    """The JSON document of a :class:`Tree`, :class:`Forest` or :class:`BoostedForest`."""
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    if isinstance(model, Tree):
        doc |= {"kind": "tree", "tree": _tree_doc(model)}
    elif isinstance(model, Forest):
        doc |= {"kind": "forest", "task": model.task, "classes": _classes_doc(model.classes),
                "trees": [_tree_doc(t) for t in model.trees]}
    elif isinstance(model, BoostedForest):
        doc |= {"kind": "boosted", "loss": model.loss, "base_score": model.base_score.tolist(),
                "learning_rate": model.learning_rate, "classes": _classes_doc(model.classes),
                "trees": [_tree_doc(t) for t in model.trees]}
    else:
        raise ParameterError(f"cannot serialise {type(model).__name__}")
    return json.dumps(doc, allow_nan=False, separators=(",", ":"))


def save(model: Model, path: str | Path) -> None:
    Path(path).write_text(dumps(model), encoding="utf-8")


def load(path: str | Path) -> Model:
    return loads(Path(path).read_text(encoding="utf-8"))


# -- decoding -------------------------------------------------------------------------------


def _fail(msg: str) -> DecodeError:
    return DecodeError(f"invalid securetrees model: {msg}")


def _obj(v: Any, keys: set[str], where: str) -> dict[str, Any]:
    if not isinstance(v, dict) or set(v) != keys:
        raise _fail(f"{where} must be an object with exactly the keys {sorted(keys)}")
    return v


def _int(v: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _fail(f"{where} must be an integer in [{lo}, {hi}]")
    return v


def _number(v: Any, where: str, *, allow_null: bool = False, allow_inf: bool = False) -> float:
    if v is None and allow_null:
        return math.nan
    if v == "+inf" and allow_inf:
        return math.inf
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _fail(f"{where} must be a finite number")
    return float(v)


def _list(v: Any, n: int | None, where: str) -> list[Any]:
    if not isinstance(v, list) or (n is not None and len(v) != n):
        raise _fail(f"{where} must be a list" + (f" of length {n}" if n is not None else ""))
    return v


def _bools(v: Any, n: int, where: str) -> np.ndarray[Any, Any]:
    items = _list(v, n, where)
    if not all(isinstance(b, bool) for b in items):
        raise _fail(f"{where} must hold booleans")
    return np.array(items, dtype=bool)


def _decode_tree(doc: Any, where: str) -> Tree:
    d = _obj(doc, _TREE_KEYS, where)
    n_features = _int(d["n_features"], f"{where}.n_features", 1, 1 << 31)
    n_outputs = _int(d["n_outputs"], f"{where}.n_outputs", 1, 1 << 20)
    nodes = _obj(d["nodes"], _NODE_KEYS, f"{where}.nodes")
    left_l = _list(nodes["left"], None, f"{where}.left")
    n = len(left_l)
    if n == 0:
        raise _fail(f"{where} has no nodes")
    left = np.array([_int(v, f"{where}.left", -1, n - 1) for v in left_l], dtype=np.int64)
    right = np.array([_int(v, f"{where}.right", -1, n - 1)
                      for v in _list(nodes["right"], n, f"{where}.right")], dtype=np.int64)
    feature = np.array([_int(v, f"{where}.feature", -1, n_features - 1)
                        for v in _list(nodes["feature"], n, f"{where}.feature")], dtype=np.int64)
    threshold = np.array([_number(v, f"{where}.threshold", allow_null=True, allow_inf=True)
                          for v in _list(nodes["threshold"], n, f"{where}.threshold")])
    categorical = _bools(nodes["categorical"], n, f"{where}.categorical")
    missing_left = _bools(nodes["missing_left"], n, f"{where}.missing_left")
    provider = np.array([_int(v, f"{where}.provider", -1, 1 << 31)
                         for v in _list(nodes["provider"], n, f"{where}.provider")], dtype=np.int64)
    withheld = _bools(nodes["withheld"], n, f"{where}.withheld")
    weight = np.array([_number(v, f"{where}.weight")
                       for v in _list(nodes["weight"], n, f"{where}.weight")])
    value = np.array([[_number(v, f"{where}.value", allow_null=True)
                       for v in _list(row, n_outputs, f"{where}.value row")]
                      for row in _list(nodes["value"], n, f"{where}.value")]).reshape(n, n_outputs)
    if np.any(weight < 0):
        raise _fail(f"{where}.weight must be >= 0")
    leaf = left == -1
    if np.any(leaf != (right == -1)):
        raise _fail(f"{where}: a node has exactly one child")
    ids = np.arange(n)
    if np.any((left[~leaf] <= ids[~leaf]) | (right[~leaf] <= ids[~leaf])) or np.any(
            left[~leaf] == right[~leaf]):
        raise _fail(f"{where}: children must have larger, distinct ids")
    parents = np.bincount(np.concatenate([left[~leaf], right[~leaf]]), minlength=n)
    if parents[0] != 0 or np.any(parents[1:] != 1):
        raise _fail(f"{where}: every node but the root must have exactly one parent")
    if np.any(feature[leaf] != -1) or np.any(provider[leaf] != -1) or np.any(
            withheld[leaf] | categorical[leaf] | missing_left[leaf]) or not np.all(
            np.isnan(threshold[leaf])):
        raise _fail(f"{where}: a leaf carries split fields")
    if not np.all(np.isfinite(value[leaf])):
        raise _fail(f"{where}: leaf values must be finite")
    inner = ~leaf
    hid = inner & withheld
    if np.any(feature[hid] != -1) or not np.all(np.isnan(threshold[hid])) or np.any(
            categorical[hid] | missing_left[hid]):
        raise _fail(f"{where}: a withheld node carries split fields")
    known = inner & ~withheld
    thr = threshold[known]
    cat = categorical[known]
    if np.any(feature[known] < 0) or np.any(provider[hid] < 0) or np.any(np.isnan(thr)):
        raise _fail(f"{where}: a known split needs a feature and a threshold, a withheld one its provider")
    cat_thr = thr[cat]
    if np.any(~np.isfinite(cat_thr)) or np.any(cat_thr < 0) or np.any(cat_thr != np.floor(cat_thr)):
        raise _fail(f"{where}: a categorical threshold must be a category code")
    return Tree(n_features, left, right, feature, threshold, categorical, missing_left,
                provider, withheld, weight, value)


def _decode_classes(v: Any) -> np.ndarray[Any, Any] | None:
    if v is None:
        return None
    d = _obj(v, {"dtype", "values"}, "classes")
    values = _list(d["values"], None, "classes.values")
    if d["dtype"] == "int":
        out = np.array([_int(x, "class", -(1 << 62), 1 << 62) for x in values], dtype=np.int64)
    elif d["dtype"] == "float":
        out = np.array([_number(x, "class") for x in values], dtype=np.float64)
    elif d["dtype"] == "bool":
        if not all(isinstance(x, bool) for x in values):
            raise _fail("classes of dtype 'bool' must be booleans")
        out = np.array(values, dtype=np.bool_)
    elif d["dtype"] == "str":
        if not all(isinstance(x, str) for x in values):
            raise _fail("classes of dtype 'str' must be strings")
        out = np.array(values, dtype=np.str_)
    else:
        raise _fail("classes.dtype must be 'bool', 'int', 'float' or 'str'")
    if out.size < 2 or np.any(out[1:] <= out[:-1]):
        raise _fail("classes must be at least two strictly increasing labels")
    return out


def loads(text: str | bytes) -> Model:
    """Decode and validate a document written by :func:`dumps`."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise _fail(f"expected str or bytes, got {type(text).__name__}")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except DecodeError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail(f"not JSON ({exc})") from None
    except RecursionError:  # the parser recurses once per nested array or object
        raise _fail("JSON nests too deeply") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _fail(f"format must be {FORMAT!r}")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise _fail(f"unsupported version {doc.get('version')!r} (this library reads {VERSION})")
    kind = doc.get("kind")
    try:
        if kind == "tree":
            _obj(doc, {"format", "version", "kind", "tree"}, "document")
            return _decode_tree(doc["tree"], "tree")
        if kind == "forest":
            _obj(doc, {"format", "version", "kind", "task", "classes", "trees"}, "document")
            if doc["task"] not in TASKS:
                raise _fail("unknown task")
            trees = tuple(_decode_tree(t, f"trees[{i}]")
                          for i, t in enumerate(_list(doc["trees"], None, "trees")))
            return Forest(trees, doc["task"], _decode_classes(doc["classes"]))
        if kind == "boosted":
            _obj(doc, {"format", "version", "kind", "loss", "base_score", "learning_rate",
                       "classes", "trees"}, "document")
            if doc["loss"] not in LOSSES:
                raise _fail("unknown loss")
            base = np.array([_number(v, "base_score")
                             for v in _list(doc["base_score"], None, "base_score")])
            trees = tuple(_decode_tree(t, f"trees[{i}]")
                          for i, t in enumerate(_list(doc["trees"], None, "trees")))
            return BoostedForest(trees, doc["loss"], base, _number(doc["learning_rate"], "lr"),
                                 _decode_classes(doc["classes"]))
    except ParameterError as exc:  # a consistency rule of the model classes
        raise _fail(str(exc)) from None
    raise _fail(f"unknown kind {kind!r}")


def _reject_constant(name: str) -> Any:
    raise _fail(f"non-standard JSON constant {name}")

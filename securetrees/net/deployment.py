"""What deployment modules share: their ``[protocol]`` keys checked, outputs kept at the party, a
Paillier key in a key file.

A deployment module (:mod:`securetrees.net.service`) reads its public parameters from the run's
``[protocol]`` table: :func:`check_protocol_keys` refuses a key it does not know (a typo would otherwise
leave a default in force without a word) and one it needs but is missing.  A party writes what it
is entitled to (its predictions, its row permutation) under ``out/`` beside ``run.toml`` on its own
machine (:func:`save_output`); the operator receives figures only when the protocol says so.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import KeyMismatchError, MissingParameterError, ParameterError
from securetrees.files import private_dir, write_private
from securetrees.net.config import RunConfig, check_keys
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.runtime.checkpoint import CheckpointFormat, CheckpointStore

__all__ = [
    "check_own_key",
    "check_protocol_keys",
    "open_paillier",
    "output_path",
    "pinned_key",
    "prediction_score",
    "published_bytes",
    "published_key",
    "save_output",
    "save_predictions",
    "save_test_rows",
    "seal_paillier",
]

PAILLIER_SCRYPT_LOG2_N = 14
"""Work factor of a Paillier key sealed inside a key file (the file itself is sealed again)."""


def check_protocol_keys(params: Mapping[str, Any], known: Collection[str], protocol: str, *,
                        required: Collection[str] = ()) -> None:
    """Refuse a ``[protocol]`` key outside ``known`` (:class:`~securetrees.errors.UnknownKeyError`, as
    :func:`~securetrees.net.config.load_config` does with the module's ``PARAMETERS``) or a missing
    ``required`` one (:class:`~securetrees.errors.MissingParameterError`)."""
    check_keys(params, known, "protocol", protocol)
    missing = sorted(set(required) - set(params))
    if missing:
        raise MissingParameterError(f"[protocol] for {protocol} lacks {missing}", tuple(missing))


def output_path(config: RunConfig, party: str, name: str) -> Path:
    """Where ``party`` keeps its output file ``name``: ``out/PARTY.NAME`` beside ``run.toml``, on its
    own machine's copy of the run folder (the folder is made if need be)."""
    return private_dir(config.path.parent / "out") / f"{party}.{name}"


def save_output(config: RunConfig, party: str, stem: str, array: npt.ArrayLike) -> Path:
    """Write ``array`` (without pickle) to ``out/PARTY.STEM.npy``, readable by its owner only (a
    party's outputs are its own); returns the path."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return write_private(output_path(config, party, f"{stem}.npy"), buffer.getvalue())


def save_predictions(config: RunConfig, party: str, ids: Sequence[str] | npt.ArrayLike | None,
                     predictions: npt.ArrayLike, proba: npt.ArrayLike | None = None, classes: Sequence[object] = (),
                     *, rows: npt.ArrayLike | None = None) -> Path:
    """The predictions a party is entitled to, kept beside its own ids of the rows: ``out/PARTY.predictions.csv``
    (``id``; with ``rows``, ``row``: each row's place in the operator's predictions file, which holds
    no id; ``prediction``: a class name or a value, and with ``proba`` one ``proba_CLASS`` column per
    class of ``classes``) and the same as arrays (``test_ids``, ``predictions``, ``proba`` ``.npy``).
    A party that holds no id of the rows (RevFRF's CS) passes ``ids=None``: its file numbers them by
    ``row`` alone (``rows``, default 0, 1, ...), and each data holder keeps its ids beside the same numbers
    (:func:`save_test_rows`).  Returns the CSV file's path."""
    pred = np.asarray(predictions)
    header, columns = ["prediction"], [pred]
    id_list = None if ids is None else np.asarray(ids, dtype=str)
    if id_list is not None and pred.shape[0] != id_list.shape[0]:
        raise ParameterError(f"{pred.shape[0]} predictions for {id_list.shape[0]} ids")
    if rows is not None or id_list is None:
        row = np.arange(pred.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
        if row.shape != pred.shape[:1]:
            raise ParameterError(f"{row.shape[0] if row.ndim else 0} row numbers for {pred.shape[0]} predictions")
        header.insert(0, "row")
        columns.insert(0, row)
    if id_list is not None:
        header.insert(0, "id")
        columns.insert(0, id_list)
        save_output(config, party, "test_ids", id_list)
    save_output(config, party, "predictions", pred)
    if proba is not None:
        p = np.asarray(proba, dtype=np.float64)
        if p.shape != (pred.shape[0], len(classes)):
            raise ParameterError(f"class probabilities of shape {p.shape} for {pred.shape[0]} rows and "
                                 f"{len(classes)} classes")
        save_output(config, party, "proba", p)
        header += [f"proba_{c}" for c in classes]
        columns += [p[:, k] for k in range(p.shape[1])]
    return _write_csv(config, party, "predictions.csv", header, columns)


def save_test_rows(config: RunConfig, party: str, ids: Sequence[str] | npt.ArrayLike) -> Path:
    """A data holder's own ids of the aligned test rows beside their numbers in the agreed order:
    ``out/PARTY.test_rows.csv`` (``id``, ``row``), the ``row`` of the predictions files that hold no id
    (the operator's, RevFRF's CS's).  Only this party reads it; returns its path."""
    id_list = np.asarray(ids, dtype=str)
    return _write_csv(config, party, "test_rows.csv", ["id", "row"], [id_list, np.arange(id_list.shape[0])])


def _write_csv(config: RunConfig, party: str, name: str, header: list[str], columns: list[npt.NDArray[Any]]) -> Path:
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(zip(*(c.tolist() for c in columns), strict=True))
    return write_private(output_path(config, party, name), text.getvalue().encode("utf-8"))


def published_bytes(params: Mapping[str, Any], key: str) -> bytes | None:
    """``[protocol] KEY``: the encoding of the Paillier public key a party published (hex;
    ``securetrees setup keys`` writes it), which the other parties pin, or ``None`` when the run names
    none.  :class:`ParameterError` when it is not hex."""
    value = params.get(key)
    if value is None:
        return None
    try:
        return bytes.fromhex(str(value))
    except ValueError:
        raise ParameterError(f"[protocol] {key} must be a Paillier public key in hex") from None


def published_key(params: Mapping[str, Any], key: str, *, insecure: bool) -> PublicKey | None:
    """:func:`published_bytes` read as a public key (its size checked against ``insecure``)."""
    raw = published_bytes(params, key)
    return None if raw is None else PublicKey.from_bytes(raw, allow_insecure=insecure)


def pinned_key(params: Mapping[str, Any], key: str, *, insecure: bool, why: str) -> PublicKey:
    """:func:`published_key`, required: :class:`~securetrees.errors.MissingParameterError` naming
    ``key`` when ``[protocol]`` does not give it (``why``: who pins it)."""
    pinned = published_key(params, key, insecure=insecure)
    if pinned is None:
        raise MissingParameterError(f"[protocol] must give {key} (hex) {why}", (key,))
    return pinned


def check_own_key(public: PublicKey, published: PublicKey | None, key: str, role: str) -> None:
    """The key holder's own check: its key file holds the key ``[protocol] KEY`` publishes
    (:class:`KeyMismatchError` otherwise: the others would pin a key it cannot use)."""
    if published is not None and public != published:
        raise KeyMismatchError(f"{role}'s key file holds another key than [protocol] {key}")


def seal_paillier(sk: PrivateKey) -> Callable[[bytes], bytes]:
    """A key-file item (:data:`securetrees.net.trial.Secret`): the private key sealed under the party's
    passphrase in its own format."""

    def sealed(passphrase: bytes) -> bytes:
        return sk.to_encrypted_bytes(passphrase, scrypt_log2_n=PAILLIER_SCRYPT_LOG2_N)

    return sealed


def open_paillier(secrets: Mapping[str, bytes], item: str, passphrase: bytes, *, role: str,
                  allow_insecure: bool = False) -> tuple[PublicKey, PrivateKey]:
    """The Paillier key pair sealed as ``item`` in ``role``'s key file."""
    sealed = secrets.get(item)
    if sealed is None:
        raise ParameterError(f"{role}'s key file has no {item!r}")
    sk = PrivateKey.from_encrypted_bytes(sealed, passphrase, allow_insecure=allow_insecure)
    return sk.public_key, sk


def prediction_score(task: str, y: npt.ArrayLike, pred: npt.ArrayLike) -> float:
    """What a party entitled to predictions reports of them: accuracy (``task="classification"``), else
    R² (1 when the targets are constant and predicted exactly, else 0 for constant targets)."""
    ya, pa = np.asarray(y), np.asarray(pred)
    if task == "classification":
        return float(np.mean(pa == ya))
    yf = ya.astype(np.float64)
    ss_tot = float(np.sum((yf - yf.mean()) ** 2))
    ss_res = float(np.sum((yf - pa.astype(np.float64)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float(ss_res == 0)


def checkpoint_store(config: RunConfig, role: str, secrets: Mapping[str, bytes],
                     fmt: CheckpointFormat) -> CheckpointStore | None:
    """Party ``role``'s checkpoint store in its protocol's format ``fmt``: ``[protocol]
    checkpoint_dir`` (relative to ``run.toml``) under the ``checkpoint_key`` of its key file, or
    ``None`` when the run keeps no checkpoints (``specs/deployment.md``, "Resume")."""
    directory = config.params.get("checkpoint_dir")
    if directory is None:
        return None
    key = secrets.get("checkpoint_key")
    if key is None:
        raise MissingParameterError(f"{role} keeps checkpoints (checkpoint_dir) but its key file has no "
                                    f"checkpoint_key: securetrees setup keys {config.protocol} --checkpoint-key",
                                    ("checkpoint_key",))
    return CheckpointStore(config.path.parent / str(directory), role, key, fmt)

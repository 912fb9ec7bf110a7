"""One-process facade: every party of a Federated Forest run in one process, scikit-learn style.

``fit(X, y)`` splits the columns of ``X`` between clients by the ``partition``
parameter (``partition[i]`` lists client ``i``'s columns, by index or, for a
DataFrame, by name; ``None``: two halves), gives the labels to client ``label_holder``, and runs the protocol over an
:class:`~securetrees.runtime.InProcessNetwork`; ``transcript_`` is the run's
record (bytes, rounds, every party's view).  The random draws index the samples
in the canonical (sorted HMAC) order: row ``sample_order_[j]`` of ``X`` is sample
``j``, so ``train_forest(X[sample_order_], y[sample_order_], ..., node_keyed_draws=True)``
with the same ``random_state`` grows the same trees.  ``predict`` runs the one-round
method (or the classical one, ``prediction="classical"``); with ``encrypted`` labels the
master hands the leaves to the label holder, which keeps the output (the facade plays it).  ``record_payloads=False``
keeps only sizes in the transcript (large benchmark runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from securetrees.errors import ParameterError, ProtocolError
from securetrees.estimator import ClassifierMixin, Estimator, RegressorMixin, check_targets, encode_labels
from securetrees.executors import check_trusted, role_executor
from securetrees.paillier import Mode, PrivateKey, PublicKey
from securetrees.progress import tracked
from securetrees.protocols.federated_forest.checkpoint import CheckpointStore
from securetrees.protocols.federated_forest.client import Client, LabelSpec
from securetrees.protocols.federated_forest.ids import canonical_order, hash_ids
from securetrees.protocols.federated_forest.master import Master
from securetrees.protocols.federated_forest.params import LABEL_MODES, ForestParams
from securetrees.protocols.federated_forest.skeleton import model_tree
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import InProcessNetwork, Transcript
from securetrees.schema import ColumnRef
from securetrees.trees import Forest

__all__ = ["FederatedForestClassifier", "FederatedForestRegressor"]

FloatArray = npt.NDArray[np.float64]
PREDICTION_METHODS = ("one-round", "classical")


def _row_ids(n: int) -> list[str]:
    """The facade's sample ids (the one process plays every client, so they agree)."""
    return [f"row-{i}" for i in range(n)]


def _derive(key: bytes, purpose: str) -> bytes:
    """A 32-byte key for one party or purpose from the facade's checkpoint key (HKDF-SHA256)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=b"securetrees/federated_forest/" + purpose.encode("utf-8")).derive(key)


class _FederatedForest(Estimator):
    _task = ""
    _fitted_attribute = "master_"
    _predicts_with_parties = True
    master_: Master

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        max_depth: int | None = None,
        min_samples_split: int = 2,
        min_samples_leaf: int = 1,
        max_features: int | float | str | None = "sqrt",
        feature_sampling: str = "node",
        bootstrap: bool = True,
        criterion: str | None = None,
        max_bins: int = 255,
        categorical_features: Sequence[bool] | Sequence[ColumnRef] | None = None,
        label_protection: str = "encrypted",
        label_holder: int = 0,
        key_bits: int = 2048,
        allow_insecure: bool = False,
        paillier_mode: Mode = "djn",
        paillier_keys: tuple[PublicKey, PrivateKey] | None = None,
        public_key_loader: Callable[[bytes], PublicKey] | None = None,
        frac_bits: int = 32,
        prediction: str = "one-round",
        checkpoint_dir: str | None = None,
        checkpoint_key: bytes | None = None,
        checkpoint: str = "tree",
        random_state: int | None = None,
        progress: bool = False,
        record_payloads: bool = True,
        rng: RandomSource | None = None,
        partition: Sequence[Sequence[ColumnRef]] | None = None,
        executor: Executor | None = None,
        n_jobs: int | None = None,
        trusted_workers: bool = False,
    ) -> None:
        self.partition = partition
        self.executor = executor
        self.n_jobs = n_jobs
        self.trusted_workers = trusted_workers
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.feature_sampling = feature_sampling
        self.bootstrap = bootstrap
        self.criterion = criterion
        self.max_bins = max_bins
        self.categorical_features = categorical_features
        self.label_protection = label_protection
        self.label_holder = label_holder
        self.key_bits = key_bits
        self.allow_insecure = allow_insecure
        self.paillier_mode = paillier_mode
        self.paillier_keys = paillier_keys
        self.public_key_loader = public_key_loader
        self.frac_bits = frac_bits
        self.prediction = prediction
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_key = checkpoint_key
        self.checkpoint = checkpoint
        self.random_state = random_state
        self.progress = progress
        self.record_payloads = record_payloads
        self.rng = rng

    # ------------------------------------------------------------------ fitting
    def _labels(self, y: object, n: int) -> tuple[npt.NDArray[Any], int | None]:
        raise NotImplementedError

    @tracked("Federated Forest fit")
    def fit(self, X: object, y: object, *, resume: bool = False) -> _FederatedForest:
        """Train on ``X``'s columns split by ``partition``; with ``checkpoint_dir`` every party
        checkpoints its own state, and ``resume=True`` finishes an interrupted run from there
        (the same data, partition, parameters and ``checkpoint_key``).  Refitting the same object
        reuses the clients' sample-id key drawn at its first fit, so two fits with the same
        ``random_state`` grow the same trees (a clone draws a fresh key)."""
        if hasattr(self, "master_"):
            del self.master_
        Xa = self._validate_X(X, reset=True)
        parts = self._vertical_partition(self.partition, min_parties=2, party="client", allow_empty=True)
        if self.label_protection not in LABEL_MODES:
            raise ParameterError(f"label_protection must be one of {LABEL_MODES}")
        if self.prediction not in PREDICTION_METHODS:
            raise ParameterError(f"prediction must be one of {PREDICTION_METHODS}")
        if isinstance(self.label_holder, bool) or not 0 <= int(self.label_holder) < len(parts):
            raise ParameterError("label_holder must index a client")
        cat = self._categorical(self.categorical_features)
        rng = self._random_source()
        codes, n_classes = self._labels(y, Xa.shape[0])
        params = ForestParams(
            n_estimators=self.n_estimators, max_depth=self.max_depth,
            min_samples_split=self.min_samples_split, min_samples_leaf=self.min_samples_leaf,
            max_features=self.max_features, feature_sampling=self.feature_sampling,
            bootstrap=self.bootstrap, random_state=self.random_state, checkpoint=self.checkpoint,
        )
        spec = LabelSpec(codes, n_classes, key_bits=self.key_bits, allow_insecure=self.allow_insecure,
                         keypair=self.paillier_keys, frac_bits=self.frac_bits)
        net = InProcessNetwork(keep_payloads=self.record_payloads)
        names = [f"client{i}" for i in range(len(parts))]
        stores: dict[str, CheckpointStore | None] = dict.fromkeys([*names, "master"])
        if self.checkpoint_dir is not None:
            if not isinstance(self.checkpoint_key, bytes) or len(self.checkpoint_key) != 32:
                raise ParameterError("checkpoint_dir needs a 32-byte checkpoint_key")
            stores = {n: CheckpointStore(self.checkpoint_dir, n, _derive(self.checkpoint_key, n), rng=rng)
                      for n in stores}
            id_key = _derive(self.checkpoint_key, "sample ids")  # the canonical order must survive a restart
        elif resume:
            raise ParameterError("resume needs checkpoint_dir")
        else:
            id_key = getattr(self, "_id_key", None) or rng.token_bytes(32)
        ids = _row_ids(Xa.shape[0])
        loader = self.public_key_loader or partial(PublicKey.from_bytes, allow_insecure=self.allow_insecure)
        with role_executor(self.executor, self.n_jobs) as ex:
            clients = [
                Client(name, net, Xa[:, cols], ids, cols, id_key, categorical=[cat[c] for c in cols],
                       labels=spec if i == self.label_holder else None, paillier_mode=self.paillier_mode,
                       public_key_loader=loader, checkpoint=stores[name], rng=rng, executor=ex,
                       trusted_workers=check_trusted(self.trusted_workers))
                for i, (name, cols) in enumerate(zip(names, parts, strict=True))
            ]
            master = Master("master", net, names, params, label_protection=self.label_protection,
                            criterion=self.criterion, max_bins=self.max_bins, checkpoint=stores["master"],
                            progress=self.progress)
            if resume:
                master.resume()
            else:
                master.fit()
        for client in clients:  # an owned pool is shut down here: prediction runs serially
            client.executor = self.executor
        self.network_ = net
        self.clients_ = clients
        self.partition_ = parts
        self._id_key = id_key
        self._n_rows = Xa.shape[0]
        self.master_ = master
        return self

    @property
    def sample_order_(self) -> npt.NDArray[np.int64]:
        """Row ``sample_order_[j]`` of the training ``X`` is canonical sample ``j``."""
        self._fitted()
        return canonical_order(hash_ids(self._id_key, _row_ids(self._n_rows)))

    @property
    def transcript_(self) -> Transcript:
        return self._fitted().network_.transcript

    def _fitted(self) -> _FederatedForest:
        self._check_fitted()
        return self

    # ------------------------------------------------------------------ prediction
    @tracked("Federated Forest prediction")
    def _output(self, X: object, method: str | None) -> FloatArray:
        self._fitted()
        how = self.prediction if method is None else method
        if how not in PREDICTION_METHODS:
            raise ParameterError(f"prediction must be one of {PREDICTION_METHODS}")
        Xa = self._validate_X(X, reset=False)
        batch = SYSTEM_RANDOM.token_bytes(8).hex()  # fresh ids per call; predict leaves the estimator as it was
        ids = [f"test{batch}-{i}" for i in range(Xa.shape[0])]
        for client, cols in zip(self.clients_, self.partition_, strict=True):
            client.load_test(Xa[:, cols], ids)
        self.master_.align_test()
        leaves = self.master_.leaf_of_one_round() if how == "one-round" else self.master_.leaf_of_classical()
        order = canonical_order(hash_ids(self._id_key, ids))  # the master's order: sorted HMAC ids
        out = np.empty((Xa.shape[0], self.master_.n_outputs), dtype=np.float64)
        out[order] = self._conclude(leaves)
        return out

    def _conclude(self, leaves: npt.NDArray[np.int64]) -> FloatArray:
        """The forest output in canonical order: the master's aggregate (``shared``), or the output
        the label holder keeps after the master hands it the leaves (``encrypted``: this process
        plays the label holder, the party entitled to it; the master sees an ``Ack`` only)."""
        if self.label_protection != "encrypted":
            return self.master_.aggregate(leaves)
        holder = self.clients_[self.label_holder]
        holder.kept_output = None
        self.master_.hand_leaves(leaves)
        if holder.kept_output is None:  # pragma: no cover - the label holder's handler always keeps it
            raise ProtocolError("the label holder kept no forest output")
        return holder.kept_output

    def complete_forest(self) -> Forest:
        """The complete trees ``T = T_1 ∪ ... ∪ T_M`` joined from every party (tests, audits):
        values from the master (``shared``) or the label holder (``encrypted``), cover
        subtrees removed (the label holder's reference flags)."""
        self._fitted()
        holder = self.clients_[self.label_holder]
        encrypted = self.label_protection == "encrypted"
        trees = [model_tree(t, holder.reference[k], [c.trees[k] for c in self.clients_], self.partition_,
                            values=holder.trees[k].value if encrypted else None)
                 for k, t in enumerate(self.master_.trees)]
        classes = getattr(self, "classes_", None)
        return Forest(tuple(trees), "classification" if classes is not None else "regression", classes)


class FederatedForestClassifier(ClassifierMixin, _FederatedForest):
    """Federated Forest for classification (binary and multi-class); see the module docstring."""

    def _labels(self, y: object, n: int) -> tuple[npt.NDArray[Any], int | None]:
        self.classes_, codes = encode_labels(y, n)
        return codes, int(self.classes_.size)

    def predict_proba(self, X: object, *, method: str | None = None) -> FloatArray:
        return self._output(X, method)

    def predict(self, X: object, *, method: str | None = None) -> npt.NDArray[Any]:
        proba = self._output(X, method)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])


class FederatedForestRegressor(RegressorMixin, _FederatedForest):
    """Federated Forest for regression (squared error); see the module docstring."""

    def _labels(self, y: object, n: int) -> tuple[npt.NDArray[Any], int | None]:
        return check_targets(y, n), None

    def predict(self, X: object, *, method: str | None = None) -> FloatArray:
        return np.asarray(self._output(X, method)[:, 0])

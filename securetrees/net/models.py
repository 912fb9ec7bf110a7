"""Each party's part of a fitted model on its own disk, and the predict-only job that loads it.

After training, the operator's ``fit`` step ends with ``save_model``: every role writes what it
keeps of the model (its partial trees and thresholds, a server's skeleton, a lookup table) to
``models/NAME.model`` beside ``run.toml`` (``[run] model_dir`` for another folder).  The file is
the library's one sealing envelope (:mod:`securetrees.sealing`: scrypt, AES-256-GCM) under the
party's passphrase, around a wire-codec :class:`ModelFile`; nothing is pickled and the whole part
is confidential to its party: thresholds, category lists and leaf values are the party's data.
The envelope's label names the format and its version (``securetrees.model.v1``); its key id is
the *model id*, 16 random bytes the operator draws at save time and hands every role, so that a
predict-only run can tell that all the parts it loaded come from the same fit.

A run with ``[run] job = "predict"`` trains nothing: every role loads its part
(:func:`load_model`: a missing, malformed, tampered, wrong-version file, or one of another
protocol, party or role, is refused with a typed error) and the operator's ``predict`` step first
checks that every role holds the same model id (:func:`check_models`).  No training data is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final

from securetrees.errors import DecodeError, KeyMismatchError, ParameterError, ProtocolError
from securetrees.files import write_private
from securetrees.net.config import RunConfig
from securetrees.net.control import ControlReply, Operator
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import codec
from securetrees.runtime.messages import Message, message
from securetrees.schema import Column, TabularSchema
from securetrees.sealing import open_sealed, seal

__all__ = ["FORMAT_VERSION", "ModelFile", "SavesModel", "SchemaState", "check_models", "load_model",
           "model_path", "open_model", "refuse_training", "save_model", "save_models", "seal_model"]

FORMAT_VERSION: Final = 1
"""The version of the model-file format this library writes and reads."""
MODEL_SCRYPT_LOG2_N: Final = 14
"""scrypt work factor of a model file (as a Paillier key inside a key file): opened once per run."""
_LABEL_PREFIX: Final = b"securetrees.model.v"
MODEL_ID_BYTES: Final = 16


def _label(version: int) -> bytes:
    return _LABEL_PREFIX + str(version).encode("ascii")


@message("securetrees.model.schema")
@dataclass(frozen=True)
class SchemaState(Message):
    """A party's table schema (:class:`TabularSchema`): its feature columns' names, kinds and
    categories, so that new rows are encoded as the training rows were."""

    names: tuple[str, ...]
    categorical: tuple[bool, ...]
    categories: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, schema: TabularSchema) -> SchemaState:
        cols = schema.columns
        return cls(tuple(c.name for c in cols), tuple(c.kind == "categorical" for c in cols),
                   tuple(tuple(c.categories) for c in cols))

    def schema(self) -> TabularSchema:
        n = len(self.names)
        if len(self.categorical) != n or len(self.categories) != n or len(set(self.names)) != n:
            raise DecodeError("inconsistent schema in a model file")
        return TabularSchema(tuple(Column(name, "categorical", cats, True) if cat else Column(name, "numeric")
                                   for name, cat, cats in zip(self.names, self.categorical, self.categories,
                                                              strict=True)), named=True)


@message("securetrees.model.file")
@dataclass(frozen=True)
class ModelFile(Message):
    """The plaintext of a model file: the format version, whose part it is (protocol, party name,
    protocol role), the model id of the fit, and the protocol's own part (``body``)."""

    version: int
    protocol: str
    party: str
    role: str
    model_id: bytes
    body: Message


def model_path(config: RunConfig, name: str) -> Path:
    """Where party ``name`` keeps its model part: ``MODEL_DIR/NAME.model`` (``[run] model_dir``,
    default ``models/`` beside ``run.toml``), on its own machine."""
    return config.model_dir / f"{name}.model"


def seal_model(part: ModelFile, passphrase: bytes, *, rng: RandomSource = SYSTEM_RANDOM,
               version: int = FORMAT_VERSION) -> bytes:
    """The bytes of a model file (``version`` other than :data:`FORMAT_VERSION`: for tests only)."""
    if len(part.model_id) != MODEL_ID_BYTES:
        raise ParameterError(f"a model id is {MODEL_ID_BYTES} bytes")
    return seal(_label(version), part.model_id, codec.encode(part), passphrase, rng=rng,
                log2_n=MODEL_SCRYPT_LOG2_N)


def open_model(data: bytes, passphrase: bytes) -> ModelFile:
    """The :class:`ModelFile` sealed in ``data``: :class:`DecodeError` on a malformed or modified
    file, a wrong passphrase or another format version."""
    label, kid, plain = open_sealed(data, passphrase)
    if label != _label(FORMAT_VERSION):
        if label.startswith(_LABEL_PREFIX):
            raise DecodeError(f"unsupported model file version {label[len(_LABEL_PREFIX):]!r} "
                              f"(this library reads {FORMAT_VERSION})")
        raise DecodeError("not a securetrees model file")
    part = codec.decode(plain)
    if not isinstance(part, ModelFile) or part.version != FORMAT_VERSION or part.model_id != kid:
        raise DecodeError("not a securetrees model file of this version")
    return part


def save_model(config: RunConfig, name: str, role: str, model_id: bytes, body: Message, passphrase: bytes) -> Path:
    """Seal ``body`` (party ``name``'s part, protocol ``role``) into :func:`model_path` (mode 0600)."""
    return write_private(model_path(config, name),
                         seal_model(ModelFile(FORMAT_VERSION, config.protocol, name, role, model_id, body), passphrase))


def load_model(config: RunConfig, name: str, role: str, passphrase: bytes, expect: type[Message]) -> ModelFile:
    """Party ``name``'s part, checked: its file exists (:class:`ParameterError`), opens
    (:class:`DecodeError`), is of this run's protocol, this party and role
    (:class:`KeyMismatchError`) and holds an ``expect`` body (:class:`DecodeError`)."""
    path = model_path(config, name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParameterError(f"{name!r} has no model file to predict with ({path}: {exc.strerror}); "
                             "a predict-only run needs the parts a fit wrote") from None
    part = open_model(data, passphrase)
    if (part.protocol, part.party, part.role) != (config.protocol, name, role):
        raise KeyMismatchError(f"{path} is the part of {part.party!r} ({part.protocol} role {part.role!r}), "
                               f"not of {name!r} ({config.protocol} role {role!r})")
    if not isinstance(part.body, expect):
        raise DecodeError(f"{path} holds a {part.body.wire_type}, expected {expect.wire_type}")
    return part


class SavesModel:
    """Mixin for a deployed role: the control actions ``save_model`` (``model_id``: hex) and
    ``model_id`` (the id of the part it loaded or saved).  The role provides :meth:`model_part`."""

    name: str
    role: ClassVar[str]
    run: RunConfig
    passphrase: bytes
    model_id: bytes = b""

    def model_part(self) -> Message:
        """What this party keeps of the fitted model (a registered message); override."""
        raise NotImplementedError

    def loaded(self, part: ModelFile) -> None:
        """Record the id of the part a predict-only run loaded."""
        self.model_id = part.model_id

    def control_save_model(self, args: dict[str, str]) -> ControlReply:
        """Write this party's part, sealed under its passphrase.  Reveals nothing: the file stays
        on this party's machine; the operator's reply carries the path only."""
        try:
            model_id = bytes.fromhex(args.get("model_id", ""))
        except ValueError:
            raise ParameterError("model_id is hex") from None
        path = save_model(self.run, self.name, self.role, model_id, self.model_part(), self.passphrase)
        self.model_id = model_id
        return ControlReply(info={"path": str(path), "model_id": model_id.hex()})

    def control_model_id(self, args: dict[str, str]) -> ControlReply:
        """The id of the fit this party's model comes from (public: a random tag)."""
        if not self.model_id:
            raise ParameterError(f"{self.name!r} holds no saved or loaded model")
        return ControlReply(info={"model_id": self.model_id.hex()})


def save_models(operator: Operator, roles: list[str], *, rng: RandomSource = SYSTEM_RANDOM) -> str:
    """The operator's end of saving: a fresh model id to every role, each writes its part;
    returns the id (hex)."""
    model_id = rng.token_bytes(MODEL_ID_BYTES).hex()
    with operator.step("save_model"):
        operator.control_many(roles, "save_model", {r: {"model_id": model_id} for r in roles})
    return model_id


def check_models(operator: Operator, roles: list[str]) -> str:
    """Every role's model id (the fit its part comes from): the same, else :class:`ProtocolError`
    naming them; returns it (hex)."""
    replies = operator.control_many(roles, "model_id")
    ids = {r: rep.info.get("model_id", "") for r, rep in replies.items()}
    if len(set(ids.values())) != 1:
        raise ProtocolError(f"the parties' model parts come from different fits: {ids}")
    return next(iter(ids.values()))


def refuse_training(config: RunConfig) -> None:
    """A predict-only run trains nothing: its ``fit`` step is refused."""
    if config.job == "predict":
        raise ParameterError(f"{config.path} is a predict-only run ([run] job = \"predict\"): it does not train")

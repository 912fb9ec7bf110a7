"""Fuzzing every other decoder: whatever the input, it decodes or raises a SecureTreesError.

Covered: Paillier public keys, ciphertexts and sealed private keys; DT-PKC public keys,
ciphertexts, secret-key bodies and sealed secret keys; the sealing envelope; tree and forest
documents (``trees.persistence.loads``); run configurations (``net.config.load_config``);
deployment key files; fixed-point encoding.  Inputs are valid objects mutated (bit flips,
truncations, splices, replaced sub-values) or arbitrary bytes.  A decoder that lets any other
exception type through fails (:func:`typed`).  Examples that reach scrypt cost about 20 ms
each (log2 n = 14), so those tests run few examples; the others run the profile's 50.
"""

from __future__ import annotations

import json
import math
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees import sealing
from securetrees.dtpkc import encrypt as dtpkc_encrypt
from securetrees.dtpkc import wire as dwire
from securetrees.encoding import FixedPoint, SignedRange
from securetrees.net.config import load_config
from securetrees.net.keyfile import open_key_file, write_key_file
from securetrees.paillier import Ciphertext, PrivateKey, PublicKey
from securetrees.rand import DeterministicRandom
from securetrees.testing.dtpkc import dtpkc_test_keys
from securetrees.testing.fuzzing import bytes_inputs, mutated, typed
from securetrees.testing.paillier import small_keypair
from securetrees.trees import RandomForestClassifier, dumps, loads

# --------------------------------------------------------------------------- Paillier

PPK, PSK = small_keypair(512)
PK_BYTES = PPK.to_bytes()
CT_BYTES = PPK.encrypt(42).to_bytes()
SEALED = PSK.to_encrypted_bytes("pw", scrypt_log2_n=14, rng=DeterministicRandom(b"fuzz"))


@given(bytes_inputs(PK_BYTES))
def test_paillier_public_key(data: bytes) -> None:
    typed(PublicKey.from_bytes, data, allow_insecure=True)
    typed(PublicKey.from_bytes, data)


@given(bytes_inputs(CT_BYTES))
def test_paillier_ciphertext(data: bytes) -> None:
    typed(Ciphertext.from_bytes, data, PPK)


@settings(max_examples=12)  # an example that keeps a valid header runs scrypt
@given(bytes_inputs(SEALED))
def test_paillier_sealed_private_key(data: bytes) -> None:
    typed(PrivateKey.from_encrypted_bytes, data, "pw", allow_insecure=True)


# --------------------------------------------------------------------------- DT-PKC

DK = dtpkc_test_keys(512)
DPK = DK.pk("u1")
D_PK_BYTES = dwire.encode_public_key(DPK.joint(DK.pk("u2")))
D_CT_BYTES = dwire.encode_ciphertext(dtpkc_encrypt(DPK, 5))
D_BODY = dwire.secret_key_bytes(DK.weak["u1"])
D_SHARE = dwire.secret_key_bytes(DK.cs_share)
D_SEALED = dwire.encrypt_secret_key(DK.cc_share, b"pw", scrypt_log2_n=14, rng=DeterministicRandom(b"fuzz"))


@given(bytes_inputs(D_PK_BYTES))
def test_dtpkc_public_key(data: bytes) -> None:
    typed(dwire.decode_public_key, data, allow_insecure=True)
    typed(dwire.decode_public_key, data, params=DK.params, allow_insecure=True)


@given(bytes_inputs(D_CT_BYTES))
def test_dtpkc_ciphertext(data: bytes) -> None:
    typed(dwire.decode_ciphertext, data, DPK)


@given(st.one_of(bytes_inputs(D_BODY), bytes_inputs(D_SHARE)))
def test_dtpkc_secret_key_body(data: bytes) -> None:
    typed(dwire.secret_key_from_bytes, data)
    typed(dwire.secret_key_from_bytes, data, params=DK.params)


@settings(max_examples=12)  # an example that keeps a valid header runs scrypt
@given(bytes_inputs(D_SEALED))
def test_dtpkc_sealed_secret_key(data: bytes) -> None:
    typed(dwire.decrypt_secret_key, data, b"pw")


# --------------------------------------------------------------------------- sealing, key files


@settings(max_examples=12)
@given(bytes_inputs(SEALED), st.sampled_from(["pw", b"pw", "", b"x" * 100]))
def test_sealing_envelope(data: bytes, passphrase: str | bytes) -> None:
    typed(sealing.open_sealed, data, passphrase)


KEY_FILE_DIR = Path(tempfile.mkdtemp(prefix="securetrees-fuzz-"))
_KEY_FILE = KEY_FILE_DIR / "cs.key"
write_key_file(_KEY_FILE, "cs", {"weak": D_BODY, "seed": b"\x00" * 32}, b"pw",
               rng=DeterministicRandom(b"fuzz"))
_KEY_FILE.chmod(0o600)
KEY_FILE = _KEY_FILE.read_bytes()


@settings(max_examples=8)
@given(bytes_inputs(KEY_FILE))
def test_key_file(data: bytes) -> None:
    path = KEY_FILE_DIR / "mutated.key"
    path.write_bytes(data)
    typed(open_key_file, path, "cs", b"pw")


# --------------------------------------------------------------------------- trees.persistence


def _model_doc() -> str:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    return dumps(RandomForestClassifier(2, max_depth=2, random_state=0).fit(X, y).model_)


MODEL = _model_doc()
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
              st.text(max_size=5), st.sampled_from(["+inf", "tree", "forest", "boosted", "int", "float"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=8,
)


def _replace(doc: Any, path: list[int], value: Any) -> Any:
    """``doc`` with the sub-value reached by ``path`` (indices into each container) replaced."""
    if not path or not isinstance(doc, (dict, list)) or not doc:
        return value
    keys = list(doc) if isinstance(doc, dict) else list(range(len(doc)))
    key = keys[path[0] % len(keys)]
    out = dict(doc) if isinstance(doc, dict) else list(doc)
    out[key] = _replace(doc[key], path[1:], value)  # type: ignore[index]
    return out


@given(st.lists(st.integers(0, 50), max_size=6), JSON_VALUES)
def test_persistence_replaced_values(path: list[int], value: Any) -> None:
    text = json.dumps(_replace(json.loads(MODEL), path, value))
    typed(loads, text)


@given(mutated(MODEL.encode()))
def test_persistence_mutated_text(data: bytes) -> None:
    typed(loads, data)
    typed(loads, data.decode("utf-8", "replace"))


def test_persistence_deep_nesting_is_a_decode_error() -> None:
    """Issue 14: deeply nested JSON raised RecursionError."""
    from securetrees.errors import DecodeError

    for depth in (10_000, 200_000):
        for text in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
            with pytest.raises(DecodeError):
                loads(text)
    with pytest.raises(DecodeError):
        loads(12)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- run configuration

CONFIG = """[run]
protocol = "revfrf"
operator = "op"
deadline = 30.0
retries = 2

[tls]
ca = "ca.pem"

[parties.op]
address = "127.0.0.1:1"
cert = "op.pem"
key = "op.key"

[parties.cs]
address = "127.0.0.1:2"
cert = "cs.pem"
key = "cs.key"
secrets = "cs.secrets"

[protocol]
n_rows = 10
"""
TOML_TOKENS = ["[", "]", "[[", "=", '"', "'", "{", "}", ",", "\n", "1e999", "-inf", "nan", "true",
               "9" * 30, "[" * 2000, "\udcff", "\x00", "deadline = 1e999", "retries = 1e999",
               "retries = [1]", "[parties.\"bad name\"]"]


@given(st.data())
def test_run_configuration(data: st.DataObject) -> None:
    text = CONFIG
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 12))
        insert = data.draw(st.one_of(st.sampled_from(TOML_TOKENS), st.text(max_size=6)))
        text = text[:i] + insert + text[i + cut:]
    path = KEY_FILE_DIR / "run.toml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    typed(load_config, path)


def test_run_configuration_regressions() -> None:
    """Deep nesting, invalid UTF-8 and an infinite retry count are ParameterErrors."""
    from securetrees.errors import ParameterError

    path = KEY_FILE_DIR / "bad.toml"
    for body in (b"x = " + b"[" * 5000 + b"]" * 5000, b"\xff\xfe", CONFIG.replace("retries = 2", "retries = inf")
                 .encode()):
        path.write_bytes(body)
        with pytest.raises(ParameterError):
            load_config(path)


# --------------------------------------------------------------------------- encoding

REALS = st.one_of(
    st.floats(), st.integers(-(2**1100), 2**1100), st.fractions(max_denominator=10**6),
    st.sampled_from([1.7e308, -1.7e308, 2.0**1023, 5e-324, Fraction(10**400), Fraction(1, 10**400),
                     np.float32(3.4e38), np.int64(-(2**63)), np.uint64(2**64 - 1), True, "1", None]),
)


@given(REALS, st.sampled_from([0, 1, 32, 52, 256]))
def test_fixed_point_encoding(x: Any, frac_bits: int) -> None:
    fp = FixedPoint(frac_bits)
    typed(fp.encode, x)
    typed(fp.encode_array, [x, 0.5])
    typed(fp.encode_int64, [x])
    typed(fp.decode, x)
    typed(fp.decode, np.array([x], dtype=object))


@given(st.integers(-(2**600), 2**600), st.integers(3, 2**512))
def test_signed_range(v: int, modulus: int) -> None:
    r = SignedRange.thirds(modulus)
    typed(r.extract, v)
    typed(r.embed, v)


@pytest.mark.parametrize("x", [1.7e308, -1.7e308, 2.0**1023, np.float64(1e300)])
def test_huge_floats_encode_exactly(x: float) -> None:
    """Issue 14: FixedPoint(32).encode(1.7e308) and encode_array([1.7e308]) raised OverflowError.
    A float that large is an integer, so its scaled value is exact: int(x) << 32."""
    fp = FixedPoint(32)
    assert fp.encode(x) == int(x) << 32
    out = fp.encode_array([x, 0.75])
    assert out.tolist() == [int(x) << 32, 3 << 30]
    assert fp.decode(fp.encode(x)) == float(x)
    assert math.isfinite(fp.decode(fp.encode(x)))


def test_encoding_overflow_is_typed() -> None:
    from securetrees.errors import EncodingOverflowError

    fp = FixedPoint(32)
    with pytest.raises(EncodingOverflowError):
        fp.encode_int64([1e300])
    with pytest.raises(EncodingOverflowError):
        fp.encode(Fraction(10**400, 3))
    with pytest.raises(EncodingOverflowError):
        fp.decode(10**400)


def test_typed_helper_fails_on_an_untyped_error() -> None:
    """Planted leak: the oracle fails on a decoder that raises a built-in error."""
    def leaky(data: bytes) -> None:
        raise OverflowError("math range error")

    with pytest.raises(pytest.fail.Exception, match="untyped OverflowError"):
        typed(leaky, b"")


# --------------------------------------------------------------------------- checkpoints, data files


def _checkpoint() -> tuple[Any, bytes]:
    from securetrees.protocols.federated_forest.checkpoint import CheckpointStore

    store = CheckpointStore(KEY_FILE_DIR, "client", b"\x01" * 32, rng=DeterministicRandom(b"fuzz"))
    from securetrees.runtime.messages import message_class

    ack = message_class("federated_forest.checkpoint")
    assert ack is not None
    return store, store.seal(ack(tree=1, layer=2))  # type: ignore[call-arg]


STORE, CHECKPOINT = _checkpoint()


@given(bytes_inputs(CHECKPOINT))
def test_federated_forest_checkpoint(data: bytes) -> None:
    from securetrees.runtime.messages import Message

    typed(STORE.open, data, Message)


def _npz(compressed: bool) -> bytes:
    import io

    buf = io.BytesIO()
    save = np.savez_compressed if compressed else np.savez
    save(buf, X=np.arange(12.0).reshape(3, 4), y=np.array([0, 1, 1]))
    return buf.getvalue()


NPZ = _npz(False)
NPZ_COMPRESSED = _npz(True)


@settings(max_examples=30)
@given(st.one_of(mutated(NPZ), mutated(NPZ_COMPRESSED)))
def test_party_data_file(data: bytes) -> None:
    from securetrees.net.service import load_data

    path = KEY_FILE_DIR / "data.npz"
    path.write_bytes(data)
    typed(load_data, path)


# --------------------------------------------------------------------------- model files


def _model_file() -> tuple[Any, bytes, bytes]:
    from securetrees.net.models import ModelFile, seal_model
    from securetrees.protocols.federated_forest.checkpoint import TreeState
    from securetrees.protocols.federated_forest.model import MasterModel

    X = np.arange(40.0).reshape(20, 2)
    forest = RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, np.arange(20) % 2)
    trees = tuple(TreeState.of(t) for t in forest.model_.trees)
    body = MasterModel(("client0", "client1"), "client0", 2, 2, "shared", "gini", np.zeros(2, dtype=np.int64), trees)
    part = ModelFile(1, "federated-forest", "master", "master", b"\x07" * 16, body)
    from securetrees.runtime import codec

    return part, codec.encode(part), seal_model(part, b"pw", rng=DeterministicRandom(b"fuzz"))


MODEL_PART, MODEL_PLAIN, MODEL_SEALED = _model_file()


def _restore_master(data: bytes) -> None:
    """The plaintext of a model file decoded and adopted by a master (what a predict-only run does
    after opening the envelope)."""
    from securetrees.net.models import ModelFile
    from securetrees.protocols.federated_forest.master import Master
    from securetrees.protocols.federated_forest.model import MasterModel
    from securetrees.protocols.federated_forest.params import ForestParams
    from securetrees.runtime import InProcessNetwork, codec

    part = codec.decode(data)
    if isinstance(part, ModelFile) and isinstance(part.body, MasterModel):
        Master("master", InProcessNetwork(), ["client0", "client1"], ForestParams(),
               label_protection="shared").restore_model(part.body)


def test_model_file_fixture_restores() -> None:
    _restore_master(MODEL_PLAIN)  # the valid document goes through (the fuzz starts from it)


@given(bytes_inputs(MODEL_PLAIN))
def test_model_file_plaintext(data: bytes) -> None:
    typed(_restore_master, data)


@settings(max_examples=10)  # an example that keeps a valid header runs scrypt
@given(bytes_inputs(MODEL_SEALED))
def test_model_file_envelope(data: bytes) -> None:
    from securetrees.net.models import open_model

    typed(open_model, data, b"pw")


# --------------------------------------------------------------------------- RevFRF model parts


def _revfrf_parts() -> tuple[bytes, bytes]:
    """The plaintexts of a RevFRF CS part (one tree: a split by u1 and two leaves) and of u1's part."""
    from securetrees.net.models import ModelFile, SchemaState
    from securetrees.protocols.revfrf.forest import RevTree
    from securetrees.protocols.revfrf.model import CSPart, ParticipantPart, forest_state, node_state
    from securetrees.protocols.revfrf.participant import OwnNode
    from securetrees.runtime import codec
    from securetrees.schema import TabularSchema

    tree = RevTree(0, np.zeros((0, 2)))
    root = tree.new_node(0, np.zeros(0, dtype=np.int64), np.zeros(2), 4.0, np.array([2.0, 2.0]))
    left = tree.new_node(1, np.zeros(0, dtype=np.int64), np.zeros(2), 3.0, np.array([3.0, 0.0]), root.id)
    right = tree.new_node(1, np.zeros(0, dtype=np.int64), np.zeros(2), 1.0, np.array([0.0, 1.0]), root.id)
    root.left, root.right, root.provider, root.column = left.id, right.id, "u1", 1
    root.split, root.epoch, root.signature = dtpkc_encrypt(DPK, 5), 0, b"\x01" * 64
    cs = CSPart(forest_state([tree]), 0, (), "classification", "soft", 2, ("a", "b"))
    schema = SchemaState.of(TabularSchema.declare(["x1"], {"x1": ["a", "b"]}))
    u1 = ParticipantPart(np.array([1], dtype=np.int64), *node_state({(0, root.id): OwnNode(1, 0.5)}), 0, False, (),
                         schema)
    return tuple(codec.encode(ModelFile(1, "revfrf", n, r, b"\x07" * 16, b))  # type: ignore[return-value]
                 for n, r, b in (("cs", "cs", cs), ("u1", "participant", u1)))


REVFRF_CS_PLAIN, REVFRF_U1_PLAIN = _revfrf_parts()


def _restore_revfrf(data: bytes) -> None:
    """A RevFRF part's plaintext decoded and adopted (the CS's forest, a participant's nodes and schema)."""
    from securetrees.net.models import ModelFile
    from securetrees.protocols.revfrf.model import CSPart, ParticipantPart, restore_forest, restore_nodes
    from securetrees.runtime import codec

    part = codec.decode(data)
    if isinstance(part, ModelFile) and isinstance(part.body, CSPart):
        restore_forest(part.body.trees, {"u1": DPK}, part.body.n_features)
    elif isinstance(part, ModelFile) and isinstance(part.body, ParticipantPart):
        restore_nodes(part.body, (1,))
        part.body.schema.schema()


def test_revfrf_part_fixtures_restore() -> None:
    from securetrees.protocols.revfrf.model import restore_forest
    from securetrees.runtime import codec

    for plain in (REVFRF_CS_PLAIN, REVFRF_U1_PLAIN):
        _restore_revfrf(plain)  # the valid documents go through (the fuzz starts from them)
    trees = codec.decode(REVFRF_CS_PLAIN).body.trees  # type: ignore[attr-defined]
    assert restore_forest(trees, {"u1": DPK}, 2)[0].nodes[0].split is not None


@given(bytes_inputs(REVFRF_CS_PLAIN))
def test_revfrf_cs_part_plaintext(data: bytes) -> None:
    typed(_restore_revfrf, data)


@given(bytes_inputs(REVFRF_U1_PLAIN))
def test_revfrf_participant_part_plaintext(data: bytes) -> None:
    typed(_restore_revfrf, data)


# --------------------------------------------------------------------------- SecureBoost model parts


def _secureboost_parts() -> tuple[bytes, bytes]:
    """A fitted SecureBoost regressor's two parts (the active party's, the passive party's), encoded."""
    from securetrees.protocols.secureboost import SecureBoostRegressor
    from securetrees.runtime import codec

    X = np.column_stack([np.arange(30.0) % 7, np.arange(30.0) % 5])
    X[::6, 1] = np.nan
    reg = SecureBoostRegressor([[0], [1]], 1, max_depth=2, max_bins=8, keypair=small_keypair(1024),
                               allow_insecure=True).fit(X, np.arange(30.0) % 5 * 2.0 - X[:, 0])
    assert reg.passives_[0].table  # the passive party holds a split
    return codec.encode(reg.active_.model_state()), codec.encode(reg.passives_[0].model_state())


SB_ACTIVE, SB_PASSIVE = _secureboost_parts()


def _restore_secureboost(data: bytes) -> None:
    """A SecureBoost model part decoded and restored into a fresh role (a predict-only run's step)."""
    from securetrees.protocols.secureboost import ActiveParty, PassiveParty, SecureBoostParams
    from securetrees.protocols.secureboost.model import ActiveModel, PassiveModel
    from securetrees.runtime import InProcessNetwork, codec

    part = codec.decode(data)
    net = InProcessNetwork()
    if isinstance(part, ActiveModel):
        ActiveParty("active", net, X=np.zeros((2, 1)), y=np.zeros(2), passives=["passive1"],
                    params=SecureBoostParams(max_depth=2, max_bins=8), keypair=small_keypair(1024)).restore_model(part)
    elif isinstance(part, PassiveModel):
        PassiveParty("passive1", net, X=np.zeros((1, 1))).restore_model(part)


def test_secureboost_parts_fixture_restores() -> None:
    _restore_secureboost(SB_ACTIVE)  # the valid parts go through (the fuzz starts from them)
    _restore_secureboost(SB_PASSIVE)


@given(st.one_of(bytes_inputs(SB_ACTIVE), bytes_inputs(SB_PASSIVE)))
def test_secureboost_parts(data: bytes) -> None:
    typed(_restore_secureboost, data)

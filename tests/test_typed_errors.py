"""Regressions for issue 14's bare built-in errors: each is now a SecureTreesError subclass that
still derives from the built-in it replaced, so ``except TypeError`` / ``except ValueError``
in callers keeps working.  ``tests/test_hygiene.py`` forbids new ones mechanically."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from securetrees.dtpkc import encrypt as dtpkc_encrypt
from securetrees.errors import DecodeError, ParameterError, SecureTreesError, TypeMismatchError
from securetrees.paillier import RandomnessPool, sum_ciphertexts
from securetrees.paillier.batch import decrypt_many
from securetrees.protocols.hybridtree.messages import NodeRouting
from securetrees.runtime import codec
from securetrees.testing.dtpkc import dtpkc_test_keys
from securetrees.testing.paillier import small_keypair

PK, SK = small_keypair(512)
DK = dtpkc_test_keys(512)

CASES: list[tuple[str, Callable[[], Any]]] = [
    ("paillier decrypt of an int", lambda: SK.decrypt(5)),  # type: ignore[arg-type]
    ("paillier decrypt_fixed of a ciphertext", lambda: SK.decrypt_fixed(PK.encrypt(1))),  # type: ignore[arg-type]
    ("paillier pickle of a private key", lambda: pickle.dumps(SK)),
    ("paillier batch decrypt of an int", lambda: decrypt_many(SK, [PK.encrypt(1), 7])),  # type: ignore[list-item]
    ("paillier sum of ints", lambda: sum_ciphertexts([3, 4])),  # type: ignore[list-item]
    ("paillier pool copy", lambda: copy.copy(RandomnessPool(PK))),
    ("paillier pool pickle", lambda: pickle.dumps(RandomnessPool(PK))),
    ("dtpkc ciphertext times ciphertext",
     lambda: dtpkc_encrypt(DK.pk("u1"), 2) * dtpkc_encrypt(DK.pk("u1"), 3)),
    ("dtpkc pickle of a weak key", lambda: pickle.dumps(DK.weak["u1"])),
    ("dtpkc copy of a share", lambda: copy.deepcopy(DK.cs_share)),
]


@pytest.mark.parametrize(("name", "call"), CASES, ids=[c[0] for c in CASES])
def test_type_errors_are_typed(name: str, call: Callable[[], Any]) -> None:
    with pytest.raises(TypeMismatchError) as info:
        call()
    assert isinstance(info.value, SecureTreesError) and isinstance(info.value, TypeError)


def test_hybridtree_message_validation_is_typed() -> None:
    with pytest.raises(ParameterError) as info:
        NodeRouting(1, np.zeros(3, dtype=np.int64))
    assert isinstance(info.value, ValueError)
    frame = codec.encode(NodeRouting(1, np.zeros(3, dtype=bool)))
    bad = frame.replace(b"|b1", b"|u1")  # same item size, wrong dtype
    with pytest.raises(DecodeError, match="routing is a one-dimensional boolean array"):
        codec.decode(bad)

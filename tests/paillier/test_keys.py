"""Key generation policy, key validation, identity and reprs (specs/paillier.md, "Keys")."""

from __future__ import annotations

import gmpy2
import pytest

from securetrees.errors import (
    DecodeError,
    InsecureParameterWarning,
    KeyMismatchError,
    ParameterError,
)
from securetrees.paillier import PrivateKey, PublicKey, generate_keypair, security_level
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import keypair_from_primes, load_test_public_key


def _check_djn_key(pk: PublicKey, sk: PrivateKey, bits: int) -> None:
    p, q = int(sk._p), int(sk._q)
    assert pk.bits == bits and p * q == pk.n
    assert p % 4 == 3 and q % 4 == 3 and gmpy2.gcd(p - 1, q - 1) == 2
    assert pow(pk.hs, (p - 1) * (q - 1), pk.n_square) == 1  # hs is an N-th residue
    assert sk.decrypt(pk.encrypt(-123456789)) == -123456789


def test_default_is_2048_bits() -> None:
    pk, sk = generate_keypair()
    _check_djn_key(pk, sk, 2048)


def test_3072_bits() -> None:
    pk, sk = generate_keypair(3072)
    _check_djn_key(pk, sk, 3072)
    assert security_level(3072) == 128


def test_1024_needs_the_insecure_flag() -> None:
    with pytest.raises(ParameterError):
        generate_keypair(1024)
    with pytest.warns(InsecureParameterWarning):
        pk, sk = generate_keypair(1024, allow_insecure=True)
    _check_djn_key(pk, sk, 1024)


@pytest.mark.parametrize("bits", [512, 1022, 64, 0, -2048, 2047, 2048.0, True])
def test_bad_sizes_refused(bits: int) -> None:
    with pytest.raises(ParameterError):
        generate_keypair(bits, allow_insecure=True)


def test_generation_is_reproducible_with_a_deterministic_source() -> None:
    a = generate_keypair(2048, rng=DeterministicRandom("keygen"))[0]
    b = generate_keypair(2048, rng=DeterministicRandom("keygen"))[0]
    assert a == b and a.key_id == b.key_id


def check_repr_hides_the_factors(sk: PrivateKey) -> None:
    text = repr(sk) + str(sk)
    for secret in (sk._p, sk._q):
        assert str(int(secret)) not in text and hex(int(secret))[2:10] not in text, "a factor is printed"
    assert "hidden" in text


def test_reprs_show_no_secret(keys: tuple[PublicKey, PrivateKey]) -> None:
    pk, sk = keys
    check_repr_hides_the_factors(sk)
    assert repr(pk).startswith("PublicKey(bits=512")


def test_a_repr_printing_a_factor_is_caught(
    keys: tuple[PublicKey, PrivateKey], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted leak: a debugging repr that prints p."""
    _, sk = keys
    monkeypatch.setattr(type(sk), "__repr__", lambda self: f"PrivateKey(hidden, p={int(self._p)})")
    monkeypatch.setattr(type(sk), "__str__", lambda self: repr(self))
    with pytest.raises(AssertionError, match="a factor is printed"):
        check_repr_hides_the_factors(sk)


def test_public_key_validation_accepts_a_real_key() -> None:
    pk, _ = generate_keypair()
    assert PublicKey(pk.n, pk.hs) == pk
    assert PublicKey.from_bytes(pk.to_bytes()) == pk


def test_public_key_size_policy_on_load(keys: tuple[PublicKey, PrivateKey]) -> None:
    pk, _ = keys
    with pytest.raises(ParameterError):
        PublicKey.from_bytes(pk.to_bytes())
    with pytest.raises(ParameterError):
        PublicKey.from_bytes(pk.to_bytes(), allow_insecure=True)  # 512 < 1024
    assert load_test_public_key(pk.to_bytes()) == pk


@pytest.fixture(scope="module")
def real() -> tuple[PublicKey, PrivateKey]:
    return generate_keypair()


def _bad_hs(pk: PublicKey) -> dict[str, int]:
    n, n2 = pk.n, pk.n_square
    nonres = next(x for x in range(2, 1000) if gmpy2.jacobi(x, n) == -1)
    return {
        "zero": 0, "one": 1, "minus one": n2 - 1, "too big": n2 + 5, "not a unit": n * 7,
        "one mod N": 1 + 5 * n, "minus one mod N": n - 1 + 3 * n,
        "jacobi -1": pow(nonres, n, n2),
    }


@pytest.mark.parametrize("case", ["zero", "one", "minus one", "too big", "not a unit",
                                  "one mod N", "minus one mod N", "jacobi -1"])
def test_hs_rejections(real: tuple[PublicKey, PrivateKey], case: str) -> None:
    pk, _ = real
    with pytest.raises(DecodeError):
        PublicKey(pk.n, _bad_hs(pk)[case])


def _prime_1_mod_4(start: int) -> int:
    p = gmpy2.next_prime(start)
    while p % 4 != 1:
        p = gmpy2.next_prime(p)
    return int(p)


@pytest.mark.parametrize("case", ["3 mod 4", "prime", "small factor", "square"])
def test_modulus_rejections(real: tuple[PublicKey, PrivateKey], case: str) -> None:
    pk, _ = real
    bad_n = {
        "3 mod 4": pk.n + 2,
        "prime": _prime_1_mod_4(3 << 2046),
        "small factor": 3 * ((1 << 2046) | 3),
        "square": int(gmpy2.next_prime(3 << 1022)) ** 2,
    }[case]
    assert bad_n.bit_length() == 2048 and bad_n % 4 == (3 if case == "3 mod 4" else 1)
    with pytest.raises(DecodeError):
        PublicKey(bad_n, pk.hs)


def test_private_key_checks(real: tuple[PublicKey, PrivateKey],
                            keys: tuple[PublicKey, PrivateKey]) -> None:
    pk, sk = real
    assert PrivateKey(pk, int(sk._p), int(sk._q)).decrypt(pk.encrypt(5)) == 5
    with pytest.raises(KeyMismatchError):
        PrivateKey(pk, int(sk._p), int(sk._q) + 2)
    with pytest.raises(KeyMismatchError):
        PrivateKey(keys[0], int(sk._p), int(sk._q))


def test_djn_conditions_checked_for_private_keys() -> None:
    # 13 ≡ 1 (mod 4): fine for the test helper, refused by the validating constructor
    pk, sk = keypair_from_primes(1000003, 13)
    assert sk.decrypt(pk.encrypt(-4)) == -4
    with pytest.raises(ParameterError):
        PrivateKey(pk, 1000003, 13)


def test_keypair_from_primes_rejects_non_primes() -> None:
    for p, q in ((15, 7), (7, 7), (2, 7)):
        with pytest.raises(ParameterError):
            keypair_from_primes(p, q)

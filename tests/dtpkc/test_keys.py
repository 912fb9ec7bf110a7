"""Key generation, key types, the KGC and the table cache (specs/dtpkc.md "Key generation")."""

from __future__ import annotations

import math

import pytest

from securetrees._nt import mpz
from securetrees.dtpkc import KGC, decrypt_strong, decrypt_weak, encrypt, psdec1, psdec2
from securetrees.dtpkc.keys import (
    PublicKey,
    TableCache,
    WeakSecretKey,
    check_key_size,
    generate_system,
    generate_weak_key,
    split_strong_key,
    system_from_primes,
)
from securetrees.errors import (
    ExponentRangeError,
    InsecureParameterWarning,
    KeyMismatchError,
    ParameterError,
    ProtocolError,
    RevokedError,
)
from securetrees.rand import DeterministicRandom
from securetrees.testing.dtpkc import DTPKCTestKeys, dtpkc_test_kgc


def test_known_answer_tiny_key() -> None:
    """KAT: p = 59, q = 47 (safe primes), every number drawn from DeterministicRandom('kat')."""
    rng = DeterministicRandom("kat")
    params, sk = system_from_primes(59, 47, rng=rng, tables=TableCache(None))
    n, n2 = 2773, 2773**2
    assert (int(params.n), int(params.g), int(sk.lam)) == (n, 6796614, 1334)
    assert sk.lam == math.lcm(58, 46)  # λ = lcm(p-1, q-1), not lcm/2
    s1, s2 = split_strong_key(sk, rng=rng)
    assert (int(s1.share), int(s2.share)) == (2402073, 2847217)
    w = generate_weak_key(params, rng=rng)
    assert (int(w.theta), int(w.public.h)) == (633, 7038529)
    assert w.key_id.hex() == "ad62b64e3d31468f7ad6e49a7d2a1f21"
    c = encrypt(w.public, -7, rng=rng)
    assert (int(c.t1), int(c.t2)) == (5001484, 5221447)
    # the pinned numbers satisfy the formulas, recomputed with plain Python ints
    assert pow(6796614, 633, n2) == 7038529
    assert 5001484 * pow(pow(5221447, 633, n2), -1, n2) % n2 == (1 - 7 * n) % n2
    s = 1334 * pow(1334, -1, n) % (1334 * n)
    assert (2402073 + 2847217) % (1334 * n) == s and s % 1334 == 0 and s % n == 1
    assert decrypt_weak(w, c) == decrypt_strong(sk, c) == psdec2(s2, psdec1(s1, c)) == -7


def test_generator_has_order_lambda(keys: DTPKCTestKeys) -> None:
    g, n2, lam = keys.params.g, keys.params.n2, keys.strong.lam
    p1q1 = lam // 2
    assert pow(g, lam, n2) == 1
    assert pow(g, p1q1, n2) == n2 - 1  # g^(λ/2) = -1: why lcm/2 is wrong (erratum E6)
    assert math.gcd(int(lam), int(keys.params.n)) == 1
    assert keys.params.bits == 512


def test_share_split(keys: DTPKCTestKeys) -> None:
    lam, n = keys.strong.lam, keys.params.n
    s = (keys.cs_share.share + keys.cc_share.share) % (lam * n)
    assert s % lam == 0 and s % n == 1
    assert (keys.cs_share.index, keys.cc_share.index) == (1, 2)
    assert keys.cs_share.share < lam * n and keys.cc_share.share < lam * n


def test_weak_keys_are_in_range(keys: DTPKCTestKeys) -> None:
    for sk in keys.weak.values():
        assert 1 <= sk.theta <= keys.params.n // 4
        assert pow(keys.params.g, sk.theta, keys.params.n2) == sk.public.h


def check_reprs_hide_the_secrets(keys: DTPKCTestKeys) -> None:
    secrets = [keys.strong.lam, keys.cs_share.share, keys.cc_share.share, keys.weak["u1"].theta]
    for obj in (keys.strong, keys.cs_share, keys.cc_share, keys.weak["u1"], keys.pk("u1")):
        text = repr(obj) + str(obj)
        assert "<secret>" in text or isinstance(obj, PublicKey)
        for sec in secrets:
            assert str(int(sec)) not in text and hex(int(sec))[2:] not in text, f"{type(obj).__name__} prints a secret"


def test_reprs_show_no_secret(keys: DTPKCTestKeys) -> None:
    check_reprs_hide_the_secrets(keys)


def test_a_repr_printing_theta_is_caught(keys: DTPKCTestKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: the weak key's repr prints θ (next to the placeholder)."""
    monkeypatch.setattr(WeakSecretKey, "__repr__", lambda self: f"WeakSecretKey(<secret>, theta={int(self.theta)})")
    with pytest.raises(AssertionError, match="WeakSecretKey prints a secret"):
        check_reprs_hide_the_secrets(keys)


def test_key_size_policy() -> None:
    check_key_size(2048, allow_insecure=False)
    check_key_size(3072, allow_insecure=False)
    with pytest.raises(ParameterError):
        check_key_size(1024, allow_insecure=False)
    with pytest.warns(InsecureParameterWarning):
        check_key_size(1024, allow_insecure=True)
    for bad in (512, 1023, 2047.0, True):
        with pytest.raises(ParameterError):
            check_key_size(bad, allow_insecure=True)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        generate_system(512)
    with pytest.raises(ParameterError):
        KGC.setup(1024)


def test_insecure_1024_bit_generation_warns_and_works() -> None:
    with pytest.warns(InsecureParameterWarning):
        kgc = KGC.setup(1024, allow_insecure=True, rng=DeterministicRandom("kgc-1024"))
    assert kgc.params.bits == 1024
    s1, s2 = kgc.strong_shares()
    sk = kgc.issue_weak_key("u")
    c = encrypt(sk.public, -123456789)
    assert psdec2(s2, psdec1(s1, c)) == decrypt_weak(sk, c) == -123456789


def test_system_from_primes_rejects_bad_primes() -> None:
    with pytest.raises(ParameterError):
        system_from_primes(59, 59)
    with pytest.raises(ParameterError):
        system_from_primes(61, 53)  # primes, not safe primes (61 = 2·30+1)
    with pytest.raises(ParameterError):
        system_from_primes(59, 23)  # different sizes


def test_kgc_issues_revokes_and_refuses() -> None:
    kgc = dtpkc_test_kgc(512)
    s1, _ = kgc.strong_shares()
    with pytest.raises(ProtocolError):
        kgc.strong_shares()  # issued once
    u1 = kgc.issue_weak_key("u1")
    kgc.issue_weak_key("u2")
    assert kgc.public_key("u1") == u1.public
    with pytest.raises(ProtocolError):
        kgc.issue_weak_key("u1")
    kgc.revoke("u1")
    assert kgc.is_revoked("u1") and "u1" not in kgc.directory()
    for call in (lambda: kgc.public_key("u1"), lambda: kgc.issue_weak_key("u1"),
                 lambda: kgc.revoke("u1")):
        with pytest.raises(RevokedError):
            call()
    with pytest.raises(KeyMismatchError):
        kgc.public_key("nobody")
    assert kgc.strong_key().params == s1.params
    kgc.forget_strong_key()
    with pytest.raises(ProtocolError):
        kgc.strong_key()
    assert "1 revoked" in repr(kgc)


def test_key_type_validation(keys: DTPKCTestKeys) -> None:
    joint = keys.pk("u1").joint(keys.pk("u2"))
    with pytest.raises(ParameterError):
        WeakSecretKey(joint, mpz(5))
    with pytest.raises(ParameterError):
        PublicKey(keys.params, mpz(1))
    with pytest.raises(ParameterError):
        PublicKey(keys.params, keys.params.n)  # not a unit
    assert joint.is_joint and len(joint.components) == 2
    assert joint.without(keys.pk("u1")) == keys.pk("u2")


def test_table_cache_builds_lazily_and_bounds_memory() -> None:
    params, _ = system_from_primes(59, 47, rng=DeterministicRandom("tables"),
                                   tables=TableCache(4, max_bases=2, build_after=2))
    cache = params.tables
    bases = [mpz(b) for b in (2, 3, 5)]
    for b in bases:
        for e in (7, 3000):
            assert cache.pow(b, mpz(e), params.n2, params.bits) == pow(int(b), e, int(params.n2))
    assert len(cache) == 2  # least recently used dropped
    big = mpz(1) << 40  # outside the declared exponent bound: refused, never a variable-time path
    with pytest.raises(ExponentRangeError):
        cache.pow(bases[2], big, params.n2, params.bits)
    with pytest.raises(ExponentRangeError):
        cache.pow(bases[2], mpz(-1), params.n2, params.bits)
    cache.configure(None)
    assert cache.pow(bases[0], mpz(9), params.n2, params.bits) == pow(2, 9, int(params.n2))
    assert len(cache) == 0
    with pytest.raises(ParameterError):
        cache.configure(13)
    with pytest.raises(ParameterError):
        TableCache(4, max_bases=0)


def test_secret_keys_are_never_pickled() -> None:
    """Review finding: θ and λ must not leave a process through pickle or copy."""
    import copy
    import pickle

    from securetrees.testing.dtpkc import dtpkc_test_keys

    keys = dtpkc_test_keys()
    for secret in (next(iter(keys.weak.values())), keys.cs_share, keys.cc_share, keys.strong):
        with pytest.raises(TypeError, match="never pickled"):
            pickle.dumps(secret)
        with pytest.raises(TypeError, match="never pickled"):
            copy.copy(secret)

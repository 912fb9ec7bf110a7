"""Canary scanning: prove that planted private values never reach a party's view.

A test plants distinctive values (a feature value, a threshold, a label, a
gradient) and hands the receiving party's records to
:func:`assert_no_canaries`.  Each canary is searched for in every encoding a
careless implementation might use: the exact integer or float in decoded
payloads (also inside numpy arrays), its fixed-point encodings at the given
scales, its residue mod 2^64, and, in the raw wire bytes, its big- and
little-endian integer bytes, IEEE-754 bytes and decimal text.

Choose canaries with plenty of entropy (e.g. 731.0271849, 9_181_726_354_637):
byte patterns shorter than four bytes are not searched in the raw data,
because they occur by chance in ciphertexts.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import numpy as np

from securetrees.errors import ParameterError
from securetrees.runtime.transcript import Record

__all__ = ["CanaryHit", "assert_no_canaries", "find_canaries"]

_MIN_PATTERN = 4


@dataclass(frozen=True)
class CanaryHit:
    canary: object
    record: Record
    where: str


def _int_forms(value: int, frac_bits: Sequence[int]) -> set[int]:
    forms = {value}
    for f in frac_bits:
        forms.add(value << f)
    forms |= {v % (1 << 64) for v in list(forms)}
    return forms


def _float_forms(value: float, frac_bits: Sequence[int]) -> set[int]:
    return _int_forms(round(value), ()) if value == int(value) else {
        v for f in frac_bits for v in _int_forms(round(math.ldexp(value, f)), ())
    }


def _byte_patterns(canary: object, frac_bits: Sequence[int]) -> set[bytes]:
    pats: set[bytes] = set()
    ints: set[int] = set()
    if isinstance(canary, (bytes, bytearray)):
        pats.add(bytes(canary))
    elif isinstance(canary, str):
        pats.add(canary.encode())
    elif isinstance(canary, int):
        ints = _int_forms(canary, frac_bits)
        pats.add(str(canary).encode())
    elif isinstance(canary, float):
        pats |= {struct.pack(">d", canary), struct.pack("<d", canary), repr(canary).encode()}
        ints = _float_forms(canary, frac_bits)
        if canary == int(canary):
            ints |= _int_forms(int(canary), frac_bits)
    for v in ints:
        for signed in (True, False):
            if v < 0 and not signed:
                continue
            minimal = max(1, (v.bit_length() + (8 if signed else 7)) // 8)
            for length in {minimal, 8} if minimal <= 8 else {minimal}:
                pats.add(v.to_bytes(length, "big", signed=signed))
                pats.add(v.to_bytes(length, "little", signed=signed))
    return {p for p in pats if len(p) >= _MIN_PATTERN}


def _walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, np.ndarray):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield path + f".{key}(key)", key
            yield from _walk(item, f"{path}.{key}")
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from _walk(getattr(value, f.name), f"{path}.{f.name}")
    else:
        yield path, value


def _scalar_matches(v: object, canary: object, ints: set[int]) -> bool:
    if isinstance(v, int):
        return v in ints
    if isinstance(v, float):
        return isinstance(canary, (int, float)) and v == float(canary)
    if isinstance(v, str):
        return isinstance(canary, (str, int, float)) and str(canary) in v
    if isinstance(v, bytes) and isinstance(canary, (bytes, str)):
        return (canary.encode() if isinstance(canary, str) else canary) in v
    return False


def _payload_hits(canary: object, payload: Any, frac_bits: Sequence[int]) -> list[str]:
    hits: list[str] = []
    ints: set[int] = set()
    if isinstance(canary, int):
        ints = _int_forms(canary, frac_bits)
    elif isinstance(canary, float):
        ints = _float_forms(canary, frac_bits)
    for path, v in _walk(payload, payload.wire_type if hasattr(payload, "wire_type") else "payload"):
        if isinstance(v, np.ndarray):
            if v.dtype.kind == "f" and isinstance(canary, (int, float)) and np.any(v == float(canary)):
                hits.append(path)
            elif v.dtype.kind in "iu" and ints:
                info = np.iinfo(v.dtype)
                candidates = [i for i in ints if info.min <= i <= info.max]
                if candidates and np.isin(v, np.array(candidates, dtype=v.dtype)).any():
                    hits.append(path)
        elif isinstance(v, bool):
            continue
        elif _scalar_matches(v, canary, ints):
            hits.append(path)
    return hits


def find_canaries(
    records: Iterable[Record], canaries: Iterable[object], *, frac_bits: Sequence[int] = (32,)
) -> list[CanaryHit]:
    """Every place a canary appears in ``records`` (payloads and raw bytes)."""
    canary_list = list(canaries)
    patterns = {id(c): _byte_patterns(c, frac_bits) for c in canary_list}
    hits: list[CanaryHit] = []
    for record in records:
        if record.data is None or record.payload is None:
            raise ParameterError("the transcript kept no payloads (keep_payloads=False); cannot scan it")
        for canary in canary_list:
            for where in _payload_hits(canary, record.payload, frac_bits):
                hits.append(CanaryHit(canary, record, f"payload {where}"))
            for pat in patterns[id(canary)]:
                if pat in record.data:
                    hits.append(CanaryHit(canary, record, f"raw bytes ({pat.hex()})"))
                    break
    return hits


def assert_no_canaries(
    records: Iterable[Record], canaries: Iterable[object], *, frac_bits: Sequence[int] = (32,)
) -> None:
    """Raise AssertionError naming every place a canary was found."""
    hits = find_canaries(records, canaries, frac_bits=frac_bits)
    if hits:
        lines = [
            f"canary {h.canary!r} reached {h.record.receiver} from {h.record.sender} "
            f"in {h.record.type_name} (round {h.record.round}): {h.where}"
            for h in hits[:20]
        ]
        raise AssertionError("private values leaked:\n" + "\n".join(lines))

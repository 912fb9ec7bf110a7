"""Private set intersection (ECDH on Curve25519 through libsodium: X25519 blinding of hashed ids).

Vertical protocols align their rows with it: every party ends with its rows of the
intersection in one agreed order, learning the intersection and set sizes only
(``specs/psi.md``).  Needs PyNaCl (``pip install 'securetrees[net]'``).
"""

from securetrees.psi.align import intersect, row_permutations
from securetrees.psi.group import blind, encode_id, hash_ids, random_scalar
from securetrees.psi.messages import LEADER_ROLE, MEMBER_ROLE
from securetrees.psi.roles import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_SET_SIZE, PsiLeader, PsiMember, PsiResult

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_MAX_SET_SIZE",
    "LEADER_ROLE",
    "MEMBER_ROLE",
    "PsiLeader",
    "PsiMember",
    "PsiResult",
    "blind",
    "encode_id",
    "hash_ids",
    "intersect",
    "random_scalar",
    "row_permutations",
]

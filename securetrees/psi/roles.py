"""ECDH private set intersection as runtime roles: a leader and one or more members.

Two parties are a leader and one member; with more, the leader runs the two-party protocol
with each member in turn (a fresh session and fresh scalars each time), intersects the
results over its own rows and sends every member the global intersection in one agreed
order (``specs/psi.md``, "Flow").  Semi-honest model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from securetrees.errors import (
    DecodeError,
    DuplicateIdError,
    ParameterError,
    ProtocolError,
    SetSizeError,
    UnexpectedMessage,
)
from securetrees.psi import messages as m
from securetrees.psi.group import (
    SESSION_BYTES,
    Id,
    blind,
    encode_ids,
    hash_ids,
    join_points,
    random_scalar,
    split_points,
)
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Party, handles
from securetrees.runtime.network import Network

__all__ = ["DEFAULT_CHUNK_SIZE", "DEFAULT_MAX_SET_SIZE", "PsiLeader", "PsiMember", "PsiResult", "random_permutation"]

DEFAULT_MAX_SET_SIZE = 1 << 21
"""Largest set a party accepts, its own or a peer's (2 097 152 ids); lower it to what the
application needs: it bounds how many guessed ids a party can probe in one run."""
DEFAULT_CHUNK_SIZE = 1 << 13
"""Points per message (256 KiB of points each way): far below gRPC's message limits."""

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PsiResult:
    """One party's outcome: ``rows[j]`` is the index, in this party's own id list, of the
    ``j``-th id of the intersection in the agreed order (the same order at every party)."""

    rows: IntArray
    peer_sizes: dict[str, int] = field(default_factory=dict)
    """Set sizes this party learned (the leader: each member's; a member: the leader's)."""
    pairwise: dict[str, int] = field(default_factory=dict)
    """The leader only: the size of its intersection with each member (it learns each one)."""


def _check_sizes(max_set_size: int, chunk_size: int) -> None:
    if isinstance(max_set_size, bool) or not isinstance(max_set_size, int) or max_set_size < 1:
        raise ParameterError("max_set_size is a positive integer")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not 1 <= chunk_size <= 1 << 20:
        raise ParameterError("chunk_size is an integer in [1, 2^20]")


def random_permutation(n: int, rng: RandomSource = SYSTEM_RANDOM) -> IntArray:
    """A secret random permutation of ``range(n)``: ``argsort`` of ``n`` random 64-bit keys
    (ties, probability below ``n²/2^65``, keep index order)."""
    keys = np.frombuffer(rng.token_bytes(8 * n), dtype="<u8")
    return np.argsort(keys, kind="stable").astype(np.int64)


def _chunk(n: int, chunk_size: int, index: int) -> range:
    start = index * chunk_size
    return range(min(start, n), min(start + chunk_size, n))


def _rounds(n_leader: int, n_member: int, chunk_size: int) -> int:
    return max(1, -(-max(n_leader, n_member) // chunk_size))


class PsiMember(Party):
    """A party that intersects its ids with the leader's; :attr:`result` once the leader is done."""

    role = m.MEMBER_ROLE

    def __init__(self, name: str, network: Network, ids: Sequence[Id], *,
                 max_set_size: int = DEFAULT_MAX_SET_SIZE, rng: RandomSource = SYSTEM_RANDOM) -> None:
        _check_sizes(max_set_size, 1)
        self._ids = encode_ids(ids, max_set_size)
        self.max_set_size = max_set_size
        self._rng = rng
        self._session: bytes | None = None
        self._scalar: bytes | None = None
        self._perm: IntArray = np.zeros(0, dtype=np.int64)
        self._leader_size = self._chunk_size = self._next = 0
        self._first: Future[list[bytes]] | None = None
        self.result: PsiResult | None = None
        super().__init__(name, network)

    def _own_chunk(self, session: bytes, scalar: bytes, perm: IntArray, chunk_size: int, index: int) -> list[bytes]:
        """Chunk ``index`` of ``b·H(y)`` over this party's ids in its shuffled order ``perm``."""
        rows = _chunk(len(self._ids), chunk_size, index)
        return blind(scalar, hash_ids(session, [self._ids[int(perm[k])] for k in rows]))

    def use_ids(self, ids: Sequence[Id]) -> None:
        """Intersect ``ids`` in the next run (a party aligning several tables, one run each).
        Reveals nothing: local."""
        self._ids = encode_ids(ids, self.max_set_size)
        self._scalar = self._session = None
        self.result = None

    @handles(m.Hello)
    def on_hello(self, sender: str, msg: m.Hello) -> m.HelloReply:
        """Start a run: fresh scalar ``b`` and a secret shuffle of this party's ids.  Learns
        the leader's set size."""
        if len(msg.session) != SESSION_BYTES:
            raise DecodeError(f"the session id is {SESSION_BYTES} bytes")
        _check_sizes(max(msg.leader_size, 1), msg.chunk_size)
        if msg.leader_size > self.max_set_size:
            raise SetSizeError(f"the leader announces {msg.leader_size} ids, above max_set_size {self.max_set_size}")
        self._session, self._scalar = msg.session, random_scalar(self._rng)
        self._perm = random_permutation(len(self._ids), self._rng)
        self._leader_size, self._chunk_size, self._next = msg.leader_size, msg.chunk_size, 0
        self.result = None
        # chunk 0 of b·H(y) starts now, while the leader computes its own chunk 0 (libsodium
        # releases the interpreter lock): the member's first exchange then only blinds
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="psi-first")
        self._first = pool.submit(self._own_chunk, self._session, self._scalar, self._perm, self._chunk_size, 0)
        pool.shutdown(wait=False)  # the thread ends with its one task
        self.logger.info("%s: PSI with %s (%d vs %d ids)", self.name, sender, msg.leader_size, len(self._ids))
        return m.HelloReply(len(self._ids))

    @handles(m.Exchange)
    def on_exchange(self, sender: str, msg: m.Exchange) -> m.ExchangeReply:
        """Blind the leader's chunk with ``b`` and return it with this party's next chunk of
        ``b·H(y)``.  Learns ``a·H(x)`` (pseudorandom under DDH); a refused point aborts."""
        if self._scalar is None or self._session is None:
            raise UnexpectedMessage("psi.exchange before psi.hello")
        if msg.index != self._next:
            raise ProtocolError(f"expected exchange chunk {self._next}, got {msg.index}")
        theirs = split_points(msg.points, len(_chunk(self._leader_size, self._chunk_size, msg.index)))
        double = blind(self._scalar, theirs)
        first, self._first = self._first, None
        if first is not None and msg.index == 0:
            own = first.result()
        else:
            own = self._own_chunk(self._session, self._scalar, self._perm, self._chunk_size, msg.index)
        self._next += 1
        return m.ExchangeReply(msg.index, join_points(double), join_points(own))

    @handles(m.Result)
    def on_result(self, sender: str, msg: m.Result) -> None:
        """The agreed order of the global intersection.  Learns which of its ids are in it."""
        if self._scalar is None or self._next != _rounds(self._leader_size, len(self._ids), self._chunk_size):
            raise UnexpectedMessage("psi.result.notice before the exchange is complete")
        pos = msg.positions
        if pos.dtype != np.int64 or pos.ndim != 1 or pos.size > min(len(self._ids), self._leader_size):
            raise DecodeError("the result is a one-dimensional int64 array no longer than either set")
        if pos.size and (pos.min() < 0 or pos.max() >= len(self._ids)):
            raise DecodeError("a result position is out of range")
        if np.unique(pos).size != pos.size:
            raise DuplicateIdError("the result names the same position twice")
        self.result = PsiResult(rows=self._perm[pos], peer_sizes={sender: self._leader_size})
        self._scalar = self._session = None  # the run is over: its scalar is never used again
        self.logger.info("%s: PSI done, %d ids in the intersection", self.name, pos.size)


class PsiLeader(Party):
    """The party that runs the PSI with each member and fixes the agreed order."""

    role = m.LEADER_ROLE

    def __init__(self, name: str, network: Network, ids: Sequence[Id], members: Sequence[str], *,
                 max_set_size: int = DEFAULT_MAX_SET_SIZE, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 rng: RandomSource = SYSTEM_RANDOM) -> None:
        _check_sizes(max_set_size, chunk_size)
        if not members or len(set(members)) != len(members) or name in members:
            raise ParameterError("the leader needs one or more distinct members other than itself")
        self._ids = encode_ids(ids, max_set_size)
        self.members = list(members)
        self.max_set_size, self.chunk_size = max_set_size, chunk_size
        self._rng = rng
        super().__init__(name, network)

    def use_ids(self, ids: Sequence[Id], members: Sequence[str] | None = None) -> None:
        """Intersect ``ids`` with ``members`` (default: the same members) in the next run.
        Reveals nothing: local."""
        chosen = self.members if members is None else list(members)
        if not chosen or len(set(chosen)) != len(chosen) or self.name in chosen:
            raise ParameterError("the leader needs one or more distinct members other than itself")
        self._ids = encode_ids(ids, self.max_set_size)
        self.members = chosen

    def _own_chunk(self, session: bytes, scalar: bytes, index: int) -> bytes:
        """Chunk ``index`` of ``a·H(x)`` over the leader's ids in row order."""
        rows = _chunk(len(self._ids), self.chunk_size, index)
        return join_points(blind(scalar, hash_ids(session, [self._ids[k] for k in rows])))

    def exchange(self, member: str) -> tuple[list[bytes], list[bytes]]:
        """The two-party PSI with ``member``: ``(ab, ba)`` where ``ab[j] = b·a·H(x_j)`` in the
        leader's row order and ``ba[k] = a·b·H(y_π(k))`` in the member's shuffled order.

        Pipelined: while the member blinds chunk ``i`` (the call runs in a worker thread;
        libsodium releases the GIL), the leader blinds the member's chunk ``i-1`` and
        computes its own chunk ``i+1``.  Learns the member's set size and the blinded values.
        """
        session = self._rng.token_bytes(SESSION_BYTES)
        hello = self.call(member, m.Hello(session, len(self._ids), self.chunk_size), expect=m.HelloReply)
        n_member = hello.member_size
        if not 0 <= n_member <= self.max_set_size:
            raise SetSizeError(f"{member} announces {n_member} ids, outside [0, max_set_size {self.max_set_size}]")
        scalar = random_scalar(self._rng)
        n = len(self._ids)
        rounds = _rounds(n, n_member, self.chunk_size)
        ab: list[bytes] = []
        ba: list[bytes] = []
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="psi-call") as pool:
            outgoing = self._own_chunk(session, scalar, 0)
            previous: m.ExchangeReply | None = None
            for i in range(rounds):
                future = pool.submit(self.call, member, m.Exchange(i, outgoing), expect=m.ExchangeReply)
                if previous is not None:
                    ba += blind(scalar, split_points(previous.own, len(_chunk(n_member, self.chunk_size, i - 1))))
                outgoing = self._own_chunk(session, scalar, i + 1) if i + 1 < rounds else b""
                previous = future.result()
                if previous.index != i:
                    raise ProtocolError(f"{member} answered chunk {previous.index} to chunk {i}")
                ab += split_points(previous.double, len(_chunk(n, self.chunk_size, i)))
            if previous is not None:
                ba += blind(scalar, split_points(previous.own, len(_chunk(n_member, self.chunk_size, rounds - 1))))
        if len(set(ab)) != len(ab) or len(set(ba)) != len(ba):
            raise DuplicateIdError(f"{member} returned the same blinded point twice")
        return ab, ba

    def run(self) -> PsiResult:
        """PSI with every member, the global intersection over the leader's rows, the agreed
        order (sorted by a keyed hash of the double-blinded values with the first member, under
        a key only the leader holds: uniformly random to everyone else), and each member's
        positions sent to it.  Learns each pairwise intersection and every set size."""
        matches: dict[str, dict[int, int]] = {}
        sizes: dict[str, int] = {}
        first: list[bytes] = []
        for member in self.members:
            ab, ba = self.exchange(member)
            where = {p: k for k, p in enumerate(ba)}
            matches[member] = {j: where[p] for j, p in enumerate(ab) if p in where}
            sizes[member] = len(ba)
            if not first:
                first = ab
        common = set.intersection(*(set(found) for found in matches.values()))
        key = self._rng.token_bytes(32)
        order = sorted(common, key=lambda j: hashlib.blake2b(first[j], key=key, digest_size=16).digest())
        for member in self.members:
            self.send(member, m.Result(np.asarray([matches[member][j] for j in order], dtype=np.int64)))
        pairwise = {member: len(found) for member, found in matches.items()}
        self.logger.info("%s: PSI done, %d ids in the intersection", self.name, len(order))
        return PsiResult(rows=np.asarray(order, dtype=np.int64), peer_sizes=sizes, pairwise=pairwise)

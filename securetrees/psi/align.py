"""Row alignment by private set intersection: each party's rows in one agreed order.

:func:`intersect` runs the leader and members (``securetrees.psi.roles``) on an in-process
network, every message still crossing as bytes into the transcript; a deployment runs the
same roles on a :class:`~securetrees.net.GrpcNetwork`, one per process.
:func:`row_permutations` is what a vertical protocol needs: for each party, the indices of
its own rows, intersection row ``j`` first at ``j``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from securetrees.errors import ParameterError, ProtocolError
from securetrees.psi.group import Id
from securetrees.psi.roles import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_SET_SIZE,
    IntArray,
    PsiLeader,
    PsiMember,
    PsiResult,
)
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import InProcessNetwork, Transcript

__all__ = ["intersect", "row_permutations"]


def intersect(sets: Mapping[str, Sequence[Id]], *, leader: str | None = None,
              max_set_size: int = DEFAULT_MAX_SET_SIZE, chunk_size: int = DEFAULT_CHUNK_SIZE,
              network: InProcessNetwork | None = None, rng: RandomSource = SYSTEM_RANDOM,
              ) -> tuple[dict[str, PsiResult], Transcript]:
    """Run the PSI among the named parties' id sets (two or more; ``leader`` defaults to the
    first).  Returns each party's :class:`PsiResult` and the run's transcript."""
    if len(sets) < 2:
        raise ParameterError("a private set intersection needs two or more parties")
    names = list(sets)
    lead = names[0] if leader is None else leader
    if lead not in sets:
        raise ParameterError(f"the leader {lead!r} holds no set")
    net = network if network is not None else InProcessNetwork()
    others = [n for n in names if n != lead]
    members = [PsiMember(n, net, sets[n], max_set_size=max_set_size, rng=rng) for n in others]
    head = PsiLeader(lead, net, sets[lead], others, max_set_size=max_set_size, chunk_size=chunk_size, rng=rng)
    results = {lead: head.run()}
    for member in members:
        if member.result is None:  # pragma: no cover - run() sends every member its result
            raise ProtocolError(f"{member.name} received no result")
        results[member.name] = member.result
    return results, net.transcript


def row_permutations(results: Mapping[str, PsiResult]) -> dict[str, IntArray]:
    """Each party's row permutation: ``X[rows]`` puts its rows in the agreed order."""
    return {name: r.rows for name, r in results.items()}

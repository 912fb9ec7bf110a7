"""RevFRF's CC: HoLT's second server (:class:`securetrees.dtpkc.twoserver.ComputationServer`)
and HEncRef at second-level revocation (FRF-Revoc lines 10-11; ``specs/revfrf.md``)."""

from __future__ import annotations

from collections.abc import Mapping

from securetrees.dtpkc import Ciphertext, PublicKey, StrongKeyShare, WeakSecretKey, hencref, twoserver
from securetrees.dtpkc.twoserver import HoLTParams
from securetrees.errors import KeyMismatchError, RevokedError, UnexpectedMessage
from securetrees.protocols.revfrf.defaults import DEFAULT_HOLT
from securetrees.protocols.revfrf.messages import RefreshReply, RefreshRequest
from securetrees.protocols.revfrf.signing import verify_revocation
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Network, handles

__all__ = ["ComputationServer"]


class ComputationServer(twoserver.ComputationServer):
    """The CC: HoLT's second server, and HEncRef at second-level revocation (FRF-Revoc line 11)."""

    def __init__(
        self,
        name: str,
        network: Network,
        *,
        share: StrongKeyShare,
        weak_key: WeakSecretKey,
        directory: Mapping[str, PublicKey],
        verify_keys: Mapping[str, bytes],
        session: bytes,
        holt_params: HoLTParams = DEFAULT_HOLT,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        super().__init__(name, network, share=share, weak_key=weak_key, directory=directory,
                         holt_params=holt_params, rng=rng)
        self._names = dict(directory)
        self._verify_keys = dict(verify_keys)
        self._session = session
        self.revoked: set[str] = set()

    @handles(RefreshRequest)
    def on_refresh(self, sender: str, msg: RefreshRequest) -> RefreshReply:
        """FRF-Revoc lines 10-11: verify the revocation, HEncRef each destroyed split with a
        fresh ρ (then forgotten), and drop the revoked key from the directory.
        Reveals to the CC: the destroyed ciphertexts."""
        rev = msg.revocation
        verify_revocation(self._verify_keys, self._session, rev)
        if rev.participant in self.revoked:
            raise RevokedError(f"{rev.participant!r} has already been revoked")
        if not len(msg.provider) == len(msg.t1) == len(msg.t2):
            raise UnexpectedMessage("one provider per split")
        self.logger.info("revocation of %s: refreshing %d destroyed splits", rev.participant, len(msg.t1))
        out1, out2, hs = [], [], []
        for q, a, b in zip(msg.provider, msg.t1, msg.t2, strict=True):
            pk = self._names.get(q)
            if pk is None:
                raise KeyMismatchError(f"no key for provider {q!r}")
            refreshed, _rho = hencref(Ciphertext.from_ints(pk, a, b), rng=self._rng)
            out1.append(int(refreshed.t1))
            out2.append(int(refreshed.t2))
            hs.append(int(refreshed.pk.h))
        self.revoked.add(rev.participant)
        self.remove_key(rev.participant)
        return RefreshReply(tuple(out1), tuple(out2), tuple(hs))

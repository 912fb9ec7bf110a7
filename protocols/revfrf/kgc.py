"""RevFRF's KGC as a party: the registered Ed25519 verification keys and key revocation
(FRF-Revoc line 15).  Key issuance happens at set-up, offline (paper §5.2; ``specs/revfrf.md``)."""

from __future__ import annotations

from collections.abc import Mapping

from securetrees.dtpkc import KGC
from securetrees.protocols.revfrf.messages import Ack, KGCRevoke
from securetrees.protocols.revfrf.signing import verify_revocation
from securetrees.runtime import Network, Party, handles

__all__ = ["KeyCentre"]


class KeyCentre(Party):
    """The KGC: verifies a participant's signed revocation request and revokes its key."""

    role = "kgc"

    def __init__(self, name: str, network: Network, *, kgc: KGC, verify_keys: Mapping[str, bytes],
                 session: bytes) -> None:
        super().__init__(name, network)
        self.kgc = kgc
        self._verify_keys = dict(verify_keys)
        self._session = session

    @handles(KGCRevoke)
    def on_revoke(self, sender: str, msg: KGCRevoke) -> Ack:
        """FRF-Revoc line 15: verify the participant's signed request, then revoke its key for
        good.  Reveals to the KGC: the revocation request."""
        verify_revocation(self._verify_keys, self._session, msg.revocation)
        self.logger.info("revoking the key of %s", msg.revocation.participant)
        self.kgc.revoke(msg.revocation.participant)
        return Ack()

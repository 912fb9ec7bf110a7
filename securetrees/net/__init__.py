"""Networked deployment: each role in its own process over gRPC with mutual TLS.

Needs the ``net`` extra (``pip install 'securetrees[net]'``).  See ``specs/deployment.md``.
"""

from securetrees.net.tls import TlsIdentity, fingerprint, load_identity, make_test_pki
from securetrees.net.transport import GrpcNetwork, Peer, TransportOptions

__all__ = ["GrpcNetwork", "Peer", "TlsIdentity", "TransportOptions", "fingerprint", "load_identity", "make_test_pki"]

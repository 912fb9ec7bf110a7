"""securetrees: cryptography-first building blocks for privacy-preserving federated tree learning.

The cryptographic core lives in submodules (``securetrees.paillier``,
``securetrees.dtpkc``, ``securetrees.secagg``, ``securetrees.encoding``);
the protocols from the papers live in the sibling package ``protocols``.
"""

from __future__ import annotations

import securetrees.log  # noqa: F401 - the package root's NullHandler (the library never configures logging)

__version__ = "0.1.0"

__all__ = ["__version__"]

"""Federated tree-learning protocols built on :mod:`securetrees` (RevFRF, Federated Forest,
HybridTree, the cross-silo histogram forest), installed as :mod:`securetrees.protocols`.

The repository keeps them in its top-level ``protocols/`` folder; ``securetrees/protocols`` points
there, so the wheel, an editable install and a checkout all import them under the one name
``securetrees.protocols``. Imported under any other name (``import protocols`` from the repository
root) every message class would be defined twice and dispatch would break, so that is refused.
"""

from securetrees.errors import NamespaceError

if __name__ != "securetrees.protocols":
    raise NamespaceError(
        f"the protocols package was imported as {__name__!r}; import it as 'securetrees.protocols' "
        "(for example 'from securetrees.protocols.revfrf import RevFRFClassifier')")

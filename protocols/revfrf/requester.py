"""A prediction requester (FRF-Predict line 1): encrypts its whole request under its own key,
each feature twice: as compared at missing-left and at missing-right nodes
(:mod:`securetrees.protocols.revfrf.missing`), so the CS cannot tell a missing value from a present one."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import WeakSecretKey, encrypt_many
from securetrees.dtpkc.twoserver import HoLTParams
from securetrees.encoding import FixedPoint
from securetrees.errors import ParameterError
from securetrees.protocols.revfrf.defaults import DEFAULT_CODEC, DEFAULT_HOLT
from securetrees.protocols.revfrf.messages import PredictReply, PredictRequest
from securetrees.protocols.revfrf.missing import value_plaintext
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Network, Party

__all__ = ["Requester"]


class Requester(Party):
    """Holds a weak key; sends ``HoEnc(pk_0, x)`` to the CS and receives the output."""

    role = "requester"

    def __init__(self, name: str, network: Network, *, weak_key: WeakSecretKey, codec: FixedPoint = DEFAULT_CODEC,
                 holt_params: HoLTParams = DEFAULT_HOLT, cs: str = "cs", rng: RandomSource = SYSTEM_RANDOM) -> None:
        super().__init__(name, network)
        self._weak = weak_key
        self._fx = codec
        self._range = holt_params.inputs(int(weak_key.public.n))
        self._cs = cs
        self._rng = rng

    def request(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """FRF-Predict: one encrypted request (NaN: a missing value); returns the CS's output
        (class distribution or value)."""
        v = np.asarray(x, dtype=np.float64)
        if v.ndim != 1:
            raise ParameterError("a request is one feature vector")
        if np.any(np.isinf(v)):
            raise ParameterError("RevFRF refuses infinite feature values (NaN is a missing value)")
        values = v.tolist()
        plain = [value_plaintext(self._fx, self._range, a, low) for low in (False, True) for a in values]
        cts = encrypt_many(self._weak.public, plain, rng=self._rng, signed=self._range)
        high, low = cts[:len(values)], cts[len(values):]
        self.logger.info("%s: encrypted prediction request (%d features)", self.name, v.size)
        reply = self.call(self._cs, PredictRequest(tuple(int(c.t1) for c in high), tuple(int(c.t2) for c in high),
                                                   tuple(int(c.t1) for c in low), tuple(int(c.t2) for c in low)),
                          expect=PredictReply)
        return np.asarray(reply.output, dtype=np.float64)

"""Parameters of a HybridTree run, validated once (``specs/hybridtree.md``, "Parameters").

The same frozen :class:`HybridTreeParams` is given to the host and to every
guest role, so both ends agree on depths, modes and the fixed-point scale.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Final, Literal, get_args

from securetrees.errors import InsecureParameterWarning, ParameterError

__all__ = ["ENCRYPTIONS", "MIN_BIN_SIZE", "MIN_GROUP_WIDTH", "MIN_NODE_SIZE", "MODES", "Encryption",
           "HybridTreeParams", "Mode", "check_mode"]

Mode = Literal["secure", "plaintext", "paper"]
MODES: Final[tuple[str, ...]] = get_args(Mode)
Encryption = Literal["djn", "djn-short", "key-owner"]
ENCRYPTIONS: Final[tuple[str, ...]] = get_args(Encryption)
FewGuests = Literal["leaf", "raise"]
#: Defaults of the guest layers' mitigation of subset-sum inference, chosen by the measurement of
#: ``python -m securetrees.protocols.hybridtree.attack`` (specs/hybridtree.md, "Subset-sum
#: inference"): minimum node size, minimum expected instances per bin group, base group width.
MIN_NODE_SIZE: Final[int] = 100
MIN_BIN_SIZE: Final[int] = 32
MIN_GROUP_WIDTH: Final[int] = 2


def check_mode(mode: str, allow_insecure: bool) -> Mode:
    """Return ``mode`` if allowed: ``plaintext`` and ``paper`` need ``allow_insecure`` and warn."""
    if mode not in MODES:
        raise ParameterError(f"unknown mode {mode!r}; choose one of {MODES}")
    if mode != "secure":
        if not allow_insecure:
            raise ParameterError(
                f"mode {mode!r} sends gradients in the clear; pass allow_insecure=True to run it"
            )
        warnings.warn(
            f"HybridTree mode {mode!r} is insecure (gradients in the clear)",
            InsecureParameterWarning,
            stacklevel=3,
        )
    return mode  # type: ignore[return-value]


def _positive_int(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class HybridTreeParams:
    """Everything both kinds of role must agree on (defaults: the paper's Section 5.1)."""

    host_depth: int = 5
    guest_depth: int = 2
    learning_rate: float = 0.1
    reg_lambda: float = 1.0
    second_order: bool = True
    min_samples_leaf: int = 1
    max_bins: int = 32
    frac_bits: int = 24
    min_guests: int = 3
    #: Guest layers split a node on guest feature f only if at least this many of its
    #: instances are owned by guests holding f (specs/hybridtree.md, "Subset-sum inference").
    min_node_size: int = MIN_NODE_SIZE
    #: The host merges adjacent base groups of a guest feature until each group of a node
    #: holds this many instances in expectation (specs/hybridtree.md, "Coarsened guest bins").
    min_bin_size: int = MIN_BIN_SIZE
    #: Bins per base group; the guests refuse any group that is not a union of base groups.
    min_group_width: int = MIN_GROUP_WIDTH
    few_guests: FewGuests = "leaf"
    encryption: Encryption = "key-owner"
    mode: Mode = "secure"

    def __post_init__(self) -> None:
        _positive_int("host_depth", self.host_depth, 0)
        _positive_int("guest_depth", self.guest_depth, 1)
        _positive_int("min_samples_leaf", self.min_samples_leaf, 1)
        _positive_int("max_bins", self.max_bins, 2)
        _positive_int("frac_bits", self.frac_bits, 1)
        if self.frac_bits > 48:
            raise ParameterError("frac_bits must be at most 48")
        _positive_int("min_guests", self.min_guests, 3)
        _positive_int("min_node_size", self.min_node_size, 0)
        _positive_int("min_bin_size", self.min_bin_size, 0)
        _positive_int("min_group_width", self.min_group_width, 1)
        if self.min_group_width > self.max_bins:
            raise ParameterError("min_group_width must be at most max_bins")
        if not (isinstance(self.learning_rate, (int, float)) and math.isfinite(self.learning_rate)
                and self.learning_rate > 0):
            raise ParameterError("learning_rate must be a positive finite number")
        if not (isinstance(self.reg_lambda, (int, float)) and math.isfinite(self.reg_lambda)
                and self.reg_lambda >= 0):
            raise ParameterError("reg_lambda must be a finite number >= 0")
        if self.few_guests not in ("leaf", "raise"):
            raise ParameterError("few_guests must be 'leaf' or 'raise'")
        if self.encryption not in ENCRYPTIONS:
            raise ParameterError(f"encryption must be one of {ENCRYPTIONS}")
        if self.mode not in MODES:
            raise ParameterError(f"mode must be one of {MODES}")

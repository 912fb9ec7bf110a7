"""Dropout-tolerant secure aggregation (Bonawitz et al. 2017, double masking) as runtime roles.

Session setup, once (specs/secagg.md, "Setup"):
  S1 ``SessionStart``: each roster party makes an X25519 share-encryption key and
     returns it signed with its roster (Ed25519) key.
  S2 ``SessionDirectory``: the server relays the signed keys; each party checks
     every signature (once per session) and derives one AES-GCM key per peer.

Each aggregation round ``r`` (specs/secagg.md, "Round"):
  R1 ``AdvertiseRound`` (AdvertiseKeys): a fresh mask key pair ``s_u`` and self-mask seed ``b_u``.
  R2 ``RoundDirectory`` (ShareKeys): ``t``-of-``n`` Shamir shares of ``s_u`` and ``b_u``,
     encrypted to each peer, relayed by the server; the associated data binds ``s_u``'s
     public key, so the round keys need no signatures.
  R3 ``MaskRequest`` (MaskedInputCollection): after every peer's share ciphertext has
     authenticated the peer's round key as this party saw it,
     ``y_u = x_u + PRG(b_u) + sum_{v>u} PRG(s_uv) - sum_{v<u} PRG(s_uv)``.
  R4 ``ConsistencyRequest`` (ConsistencyCheck): each survivor signs the survivor set it was shown.
  R5 ``UnmaskRequest`` (Unmasking): after checking the signatures, each party reveals shares of
     ``b_v`` for survivors and of ``s_v`` for parties that dropped before R3, never both for one party.

Mask key pairs are per round: once ``s_v`` is reconstructed for a party that
dropped, it opens only that round's pairwise masks.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from securetrees.errors import (
    ParameterError,
    PartyUnavailable,
    ProtocolError,
    UnexpectedMessage,
)
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Network, Party, handles
from securetrees.secagg import shamir
from securetrees.secagg.channel import associated_data, open_sealed, seal
from securetrees.secagg.keyagree import AgreementKey, KeyContext, derive_key, derive_own_key, encode_fields
from securetrees.secagg.masker import check_party_count, mask_purpose
from securetrees.secagg.messages import (
    Ack,
    AdvertiseRound,
    ConsistencyRequest,
    KeyEntry,
    MaskedInput,
    MaskRequest,
    NamedShare,
    RoundDirectory,
    RoundKey,
    RoundKeyEntry,
    RoundShares,
    SealedShare,
    SessionDirectory,
    SessionStart,
    SignedKey,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskShares,
)
from securetrees.secagg.prg import MaskExpander, MaskTerm
from securetrees.secagg.rings import Ring, Vector, Z2k
from securetrees.signing import SigningKey, verify

__all__ = ["AggregateResult", "SecAggClient", "SecAggConfig", "SecAggServer", "Stage"]

MAX_LENGTH = 1 << 27
_PURPOSE = "secagg/input"
_SHARE_KIND = "round-shares"


def _statement(*fields: bytes | str | int) -> bytes:
    """What a client signs: the domain-separated, length-prefixed encoding of ``fields``."""
    return encode_fields(b"securetrees/secagg/sig", *fields)


class Stage(enum.IntEnum):
    """Protocol steps, in order; a client with ``drop_at=s`` answers nothing from ``s`` on."""

    SETUP = 0
    DIRECTORY = 1
    ADVERTISE = 2
    SHARE_KEYS = 3
    MASKED_INPUT = 4
    CONSISTENCY = 5
    UNMASK = 6


@dataclass(frozen=True)
class SecAggConfig:
    """What every party of a run agrees on out of band.

    ``roster`` maps each client name to its Ed25519 verification key.  The
    threshold ``t`` defaults to ``n // 2 + 1``; it must exceed ``n / 2`` so that
    two disjoint groups cannot each reconstruct a secret.
    """

    roster: Mapping[str, bytes]
    threshold: int = 0
    ring: Ring = field(default_factory=Z2k)
    server: str = "server"

    def __post_init__(self) -> None:
        object.__setattr__(self, "roster", dict(self.roster))
        n = len(self.roster)
        check_party_count(n)
        if self.server in self.roster:
            raise ParameterError("the server is not a client of its own aggregation")
        if any(len(k) != 32 for k in self.roster.values()):
            raise ParameterError("roster keys are 32-byte Ed25519 public keys")
        t = self.threshold or n // 2 + 1
        if not n // 2 < t <= n:
            raise ParameterError(f"threshold {t} must lie in ({n}/2, {n}]")
        object.__setattr__(self, "threshold", t)

    def point(self, name: str) -> int:
        """The Shamir point of a party (its 1-based index in the sorted roster)."""
        names = sorted(self.roster)
        if name not in self.roster:
            raise ProtocolError(f"{name!r} is not in the roster")
        return names.index(name) + 1

    def require_quorum(self, names: Iterable[str], what: str) -> None:
        count = len(set(names))
        if count < max(self.threshold, 3):
            raise ProtocolError(
                f"only {count} parties {what}; at least t = {self.threshold} (and 3) are needed"
            )


def _distinct(names: Iterable[str], what: str) -> tuple[str, ...]:
    items = tuple(names)
    if len(set(items)) != len(items):
        raise ProtocolError(f"duplicate names in {what}")
    return tuple(sorted(items))


@dataclass
class _ClientRound:
    """One client's state for one round; its repr hides the self-mask seed and the held shares."""

    length: int
    mask_key: AgreementKey
    seed: bytes = field(repr=False)
    keys: dict[str, bytes] = field(default_factory=dict)  # U1: round public keys
    participants: tuple[str, ...] = ()  # U2
    held: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)  # owner -> (key share, seed share)
    survivors: tuple[str, ...] | None = None  # U3 as signed
    survivor_signature: bytes = b""  # this party's signature on U3
    stage: Stage = Stage.ADVERTISE


class SecAggClient(Party):
    """A client of the aggregation: holds one input vector per round.

    ``drop_at`` simulates a dropout: from that stage on the client answers nothing
    (it raises :class:`PartyUnavailable`, which the network reports as missing).
    Requests are admitted from the server role only (the message declarations).
    """

    role = "client"

    def __init__(
        self,
        name: str,
        network: Network,
        *,
        config: SecAggConfig,
        signing_key: SigningKey,
        rng: RandomSource = SYSTEM_RANDOM,
        drop_at: Stage | None = None,
    ) -> None:
        if name not in config.roster:
            raise ParameterError(f"{name!r} is not in the roster")
        if config.roster[name] != signing_key.public:
            raise ParameterError("the signing key does not match the roster entry")
        super().__init__(name, network)
        self.config = config
        self._signer = signing_key
        self._rng = rng
        self.drop_at = drop_at
        self._dropped = False
        self._session: bytes | None = None
        self._enc_key: AgreementKey | None = None
        self._session_advert: SignedKey | None = None
        self._channels: dict[str, bytes] = {}
        self._inputs: dict[int, Vector] = {}
        self._rounds: dict[int, _ClientRound] = {}
        self._expander = MaskExpander()

    def provide(self, round: int, values: Any) -> None:
        """Set this party's input for ``round`` (validated against the ring)."""
        if round in self._rounds or round in self._inputs:
            raise ParameterError(f"the input of round {round} is already set")
        self._inputs[round] = self.config.ring.check(values)

    # -- helpers ---------------------------------------------------------------------------

    def _enter(self, stage: Stage) -> None:
        if self._dropped or (self.drop_at is not None and stage >= self.drop_at):
            self._dropped = True
            raise PartyUnavailable(f"{self.name} has dropped out (simulated at {stage.name})")

    def _session_id(self) -> bytes:
        if self._session is None or not self._channels:
            raise UnexpectedMessage("the session is not set up")
        return self._session

    def _round(self, number: int, stage: Stage) -> _ClientRound:
        state = self._rounds.get(number)
        if state is None or state.stage != stage:
            raise UnexpectedMessage(f"round {number} is not waiting for {stage.name}")
        return state

    def _key_directory(
        self,
        entries: Sequence[KeyEntry | RoundKeyEntry],
        allowed: Iterable[str],
        own: bytes,
        check: Callable[[Any], None] | None = None,
    ) -> dict[str, bytes]:
        """The keys of a directory: distinct names within ``allowed``, each entry passed to
        ``check``, this party's own key ``own`` present, and a quorum."""
        names = _distinct((e.name for e in entries), "the key directory")
        if not set(names) <= set(allowed):
            raise ProtocolError("the key directory names parties outside the session")
        keys: dict[str, bytes] = {}
        for e in entries:
            if check is not None:
                check(e)
            keys[e.name] = e.public
        if keys.get(self.name) != own:
            raise ProtocolError("the key directory does not carry this party's own key")
        self.config.require_quorum(names, "advertised keys")
        return keys

    # -- setup -----------------------------------------------------------------------------

    @handles(SessionStart)
    def on_session_start(self, sender: str, msg: SessionStart) -> SignedKey:
        """S1. Reveals: a fresh X25519 public key for share encryption."""
        self._enter(Stage.SETUP)
        if self._session is not None:
            raise UnexpectedMessage("the session is already set up")
        if len(msg.session) < 16:
            raise ProtocolError("a session id has at least 16 bytes")
        self._session = msg.session
        self.logger.info("%s joins a secure-aggregation session", self.name)
        self._enc_key = AgreementKey.generate(rng=self._rng)
        pub = self._enc_key.public
        sig = self._signer.sign(_statement("session-key", msg.session, self.name, pub))
        self._session_advert = SignedKey(pub, sig)
        return self._session_advert

    @handles(SessionDirectory)
    def on_session_directory(self, sender: str, msg: SessionDirectory) -> Ack:
        """S2. Checks every signature and derives one AES-GCM key per peer. Reveals: nothing."""
        self._enter(Stage.DIRECTORY)
        session, enc_key, mine = self._session, self._enc_key, self._session_advert
        if session is None or enc_key is None or mine is None or self._channels:
            raise UnexpectedMessage("no session directory expected now")

        def signed(e: KeyEntry) -> None:
            # Its own entry, byte for byte as sent, carries its own valid signature: not re-checked.
            if e.name != self.name or (e.public, e.signature) != (mine.public, mine.signature):
                verify(self.config.roster[e.name], e.signature,
                       _statement("session-key", session, e.name, e.public))

        keys = self._key_directory(msg.entries, self.config.roster, mine.public, signed)
        for peer, public in keys.items():
            if peer != self.name:
                ctx = KeyContext(session, 0, "share-enc", (self.name, peer))
                self._channels[peer] = derive_key(enc_key.agree(public), ctx)
        return Ack(True)

    # -- one aggregation round -------------------------------------------------------------

    @handles(AdvertiseRound)
    def on_advertise(self, sender: str, msg: AdvertiseRound) -> RoundKey:
        """R1 AdvertiseKeys. Reveals: a fresh X25519 public key for this round's masks."""
        self._enter(Stage.ADVERTISE)
        self._session_id()
        if msg.round < 1 or msg.round in self._rounds:
            raise UnexpectedMessage(f"round {msg.round} was already started or is invalid")
        value = self._inputs.get(msg.round)
        if value is None:
            raise ProtocolError(f"{self.name} has no input for round {msg.round}")
        if msg.length != len(value):
            raise ProtocolError(f"round {msg.round} sums vectors of {msg.length}, not {len(value)}")
        key = AgreementKey.generate(rng=self._rng)
        self._rounds[msg.round] = _ClientRound(msg.length, key, self._rng.token_bytes(32))
        return RoundKey(key.public)

    @handles(RoundDirectory)
    def on_round_directory(self, sender: str, msg: RoundDirectory) -> RoundShares:
        """R2 ShareKeys. Reveals to each peer (through the server, encrypted): one share of s_u and b_u.

        The peers' round keys are not used before R3, where each is authenticated by
        the peer's share ciphertext.
        """
        self._enter(Stage.SHARE_KEYS)
        session = self._session_id()
        state = self._round(msg.round, Stage.ADVERTISE)
        own = state.mask_key.public
        keys = self._key_directory(msg.entries, self._channels.keys() | {self.name}, own)
        state.keys = keys
        points = {name: self.config.point(name) for name in keys}
        t = self.config.threshold
        key_shares = shamir.split(state.mask_key.secret(), t, list(points.values()), rng=self._rng)
        seed_shares = shamir.split(state.seed, t, list(points.values()), rng=self._rng)
        sealed: list[SealedShare] = []
        for peer, x in sorted(points.items()):
            pair = (key_shares[x], seed_shares[x])
            if peer == self.name:
                state.held[peer] = pair
                continue
            plain = shamir.share_to_bytes(pair[0]) + shamir.share_to_bytes(pair[1])
            ad = associated_data(session, msg.round, _SHARE_KIND, self.name, peer, own)
            sealed.append(SealedShare(self.name, peer, seal(self._channels[peer], plain, ad, rng=self._rng)))
        state.stage = Stage.SHARE_KEYS
        return RoundShares(msg.round, tuple(sealed))

    @handles(MaskRequest)
    def on_mask_request(self, sender: str, msg: MaskRequest) -> MaskedInput:
        """R3 MaskedInputCollection. Reveals: y_u, uniform in the ring to anyone without the masks."""
        self._enter(Stage.MASKED_INPUT)
        session = self._session_id()
        state = self._round(msg.round, Stage.SHARE_KEYS)
        u2 = _distinct(msg.participants, "the participant set")
        if self.name not in u2 or not set(u2) <= state.keys.keys():
            raise ProtocolError("the participant set must contain this party and lie within U1")
        self.config.require_quorum(u2, "shared their keys")
        peers = [v for v in u2 if v != self.name]
        by_sender: dict[str, SealedShare] = {}
        for item in msg.shares:
            if item.recipient != self.name or item.sender in by_sender:
                raise ProtocolError("misaddressed or duplicate share ciphertext")
            by_sender[item.sender] = item
        if set(by_sender) != set(peers):
            raise ProtocolError("the share ciphertexts do not match the participant set")
        for peer in peers:
            # Authenticates the peer's round key as shown here: the peer bound its own into the AD.
            ad = associated_data(session, msg.round, _SHARE_KIND, peer, self.name, state.keys[peer])
            plain = open_sealed(self._channels[peer], by_sender[peer].blob, ad)
            if len(plain) != 2 * shamir.SHARE_BYTES:
                raise ProtocolError("a share payload has the wrong length")
            half = shamir.SHARE_BYTES
            state.held[peer] = (
                shamir.share_from_bytes(plain[:half]),
                shamir.share_from_bytes(plain[half:]),
            )
        ring = self.config.ring
        purpose = mask_purpose(_PURPOSE, ring)
        masks = [MaskTerm(derive_own_key(
            state.seed, session=session, round=msg.round, purpose=purpose, party=self.name,
        ))]
        for peer in peers:
            ctx = KeyContext(session, msg.round, purpose, (self.name, peer))
            pair_key = derive_key(state.mask_key.agree(state.keys[peer]), ctx)
            masks.append(MaskTerm(pair_key, subtract=peer < self.name))
        # The input is this party's private copy (Ring.check): mask it in place, in one pass.
        acc = ring.accumulate(self._inputs.pop(msg.round), masks, self._expander)
        state.participants = u2
        state.stage = Stage.MASKED_INPUT
        return MaskedInput(msg.round, ring.to_wire(ring.finish(acc)))

    @handles(ConsistencyRequest)
    def on_consistency(self, sender: str, msg: ConsistencyRequest) -> SurvivorSignature:
        """R4 ConsistencyCheck. Reveals: a signature on the survivor set U3 it was shown."""
        self._enter(Stage.CONSISTENCY)
        session = self._session_id()
        state = self._round(msg.round, Stage.MASKED_INPUT)
        u3 = _distinct(msg.survivors, "the survivor set")
        if self.name not in u3 or not set(u3) <= set(state.participants):
            raise ProtocolError("the survivor set must contain this party and lie within U2")
        self.config.require_quorum(u3, "sent masked inputs")
        state.survivors = u3
        state.survivor_signature = self._signer.sign(_statement("survivors", session, msg.round, *u3))
        state.stage = Stage.CONSISTENCY
        return SurvivorSignature(self.name, state.survivor_signature)

    @handles(UnmaskRequest)
    def on_unmask(self, sender: str, msg: UnmaskRequest) -> UnmaskShares:
        """R5 Unmasking. Reveals: shares of b_v for v in U3 and of s_v for v in U2 \\ U3, never both."""
        self._enter(Stage.UNMASK)
        session = self._session_id()
        state = self._round(msg.round, Stage.CONSISTENCY)
        both = set(msg.survivors) & set(msg.dropped)
        if both:
            raise ProtocolError(
                f"refusing to reveal both the self-mask seed and the mask key of {sorted(both)}"
            )
        u3 = state.survivors or ()
        if _distinct(msg.survivors, "the survivor set") != u3:
            raise ProtocolError("the server asks to unmask a survivor set other than the one signed")
        expected_dropped = tuple(v for v in state.participants if v not in u3)
        if _distinct(msg.dropped, "the dropped set") != expected_dropped:
            raise ProtocolError("the dropped set is not U2 minus the signed survivor set")
        signers = _distinct((s.name for s in msg.signatures), "the signatures")
        if not set(signers) <= set(u3):
            raise ProtocolError("a consistency signature comes from outside the survivor set")
        self.config.require_quorum(signers, "signed the survivor set")
        statement = _statement("survivors", session, msg.round, *u3)
        for item in msg.signatures:
            if item.name == self.name and item.signature == state.survivor_signature:
                continue  # its own signature on this very set (see on_session_directory)
            try:
                verify(self.config.roster[item.name], item.signature, statement)
            except ProtocolError as exc:
                raise ProtocolError(
                    f"inconsistent survivor sets: {item.name} did not sign the set shown here"
                ) from exc
        state.stage = Stage.UNMASK
        seeds = tuple(NamedShare(v, shamir.share_to_bytes(state.held[v][1])) for v in u3)
        keys = tuple(NamedShare(v, shamir.share_to_bytes(state.held[v][0])) for v in expected_dropped)
        state.held.clear()
        return UnmaskShares(msg.round, seeds, keys)


@dataclass(frozen=True)
class AggregateResult:
    """The sum of the inputs of ``contributors`` (U3); ``dropped`` left before sending theirs."""

    total: Vector
    contributors: tuple[str, ...]
    dropped: tuple[str, ...]
    responders: tuple[str, ...]


class SecAggServer(Party):
    """The aggregation server: relays keys and shares, sums masked inputs, removes the masks."""

    role = "server"

    def __init__(
        self, network: Network, *, config: SecAggConfig, rng: RandomSource = SYSTEM_RANDOM
    ) -> None:
        super().__init__(config.server, network)
        self.config = config
        self._rng = rng
        self._session: bytes | None = None
        self.members: tuple[str, ...] = ()
        self._used_rounds: set[int] = set()
        self._expander = MaskExpander()

    def setup(self) -> tuple[str, ...]:
        """S1-S2: exchange signed share-encryption keys; returns the session's members."""
        if self._session is not None:
            raise ProtocolError("the session is already set up")
        session = self._rng.token_bytes(32)
        self._session = session
        adverts = self.call_many(
            {p: SessionStart(session) for p in sorted(self.config.roster)},
            expect=SignedKey, allow_missing=True,
        )
        self.config.require_quorum(adverts, "answered the session start")
        entries = tuple(KeyEntry(p, k.public, k.signature) for p, k in sorted(adverts.items()))
        acks = self.call_many(
            {p: SessionDirectory(entries) for p in adverts}, expect=Ack, allow_missing=True
        )
        self.config.require_quorum(acks, "joined the session")
        self.members = tuple(sorted(acks))
        self.logger.info("secure-aggregation session set up with %d members", len(self.members))
        return self.members

    def aggregate(self, round: int, length: int) -> AggregateResult:
        """R1-R5 for one round: the sum of the survivors' inputs. Reveals to the server: that sum."""
        if self._session is None:
            raise ProtocolError("call setup() first")
        if round < 1 or round in self._used_rounds:
            raise ParameterError(f"round {round} is invalid or already used")
        if not 0 < length <= MAX_LENGTH:
            raise ParameterError(f"vector length must be in [1, {MAX_LENGTH}]")
        self._used_rounds.add(round)
        self.logger.debug("aggregation round %d: %d values", round, length)
        cfg, ring, session = self.config, self.config.ring, self._session

        adverts = self.call_many(
            {p: AdvertiseRound(round, length) for p in self.members},
            expect=RoundKey, allow_missing=True,
        )
        cfg.require_quorum(adverts, "advertised round keys")
        round_keys = {p: k.public for p, k in adverts.items()}
        entries = tuple(RoundKeyEntry(p, k) for p, k in sorted(round_keys.items()))

        shared = self.call_many(
            {p: RoundDirectory(round, entries) for p in adverts},
            expect=RoundShares, allow_missing=True,
        )
        cfg.require_quorum(shared, "shared their keys")
        u2 = tuple(sorted(shared))
        inbox: dict[str, list[SealedShare]] = {p: [] for p in u2}
        for p, reply in shared.items():
            for item in reply.shares:
                if item.sender != p:
                    raise ProtocolError(f"{p} sent a share ciphertext in another party's name")
                if item.recipient in inbox:
                    inbox[item.recipient].append(item)

        masked = self.call_many(
            {p: MaskRequest(round, u2, tuple(inbox[p])) for p in u2},
            expect=MaskedInput, allow_missing=True,
        )
        cfg.require_quorum(masked, "sent masked inputs")
        u3 = tuple(sorted(masked))
        vectors = [ring.from_wire(masked[p].vector, length) for p in u3]
        dropped = tuple(p for p in u2 if p not in masked)

        signed = self.call_many(
            {p: ConsistencyRequest(round, u3) for p in u3},
            expect=SurvivorSignature, allow_missing=True,
        )
        cfg.require_quorum(signed, "signed the survivor set")
        signatures = tuple(signed[p] for p in sorted(signed))

        unmasked = self.call_many(
            {p: UnmaskRequest(round, u3, dropped, signatures) for p in sorted(signed)},
            expect=UnmaskShares, allow_missing=True,
        )
        cfg.require_quorum(unmasked, "answered the unmasking request")
        seed_shares: dict[str, dict[int, int]] = {p: {} for p in u3}
        key_shares: dict[str, dict[int, int]] = {p: {} for p in dropped}
        for responder, answer in unmasked.items():
            x = cfg.point(responder)
            for table, items in ((seed_shares, answer.seed_shares), (key_shares, answer.key_shares)):
                for named in items:
                    if named.owner not in table or x in table[named.owner]:
                        raise ProtocolError(f"{responder} revealed an unrequested or duplicate share")
                    table[named.owner][x] = shamir.share_from_bytes(named.share)

        purpose = mask_purpose(_PURPOSE, ring)
        masks: list[MaskTerm] = []
        for p in u3:
            seed = shamir.reconstruct(seed_shares[p], cfg.threshold)
            own = derive_own_key(seed, session=session, round=round, purpose=purpose, party=p)
            masks.append(MaskTerm(own, subtract=True))
        for d in dropped:
            secret = AgreementKey.from_secret(shamir.reconstruct(key_shares[d], cfg.threshold))
            if secret.public != round_keys[d]:
                raise ProtocolError(f"the reconstructed mask key of {d} does not match its advert")
            for u in u3:
                ctx = KeyContext(session, round, purpose, (u, d))
                pair_key = derive_key(secret.agree(round_keys[u]), ctx)
                # u added +PRG when d > u and -PRG when d < u: undo it.
                masks.append(MaskTerm(pair_key, subtract=d > u))
        # One pass: the sum of the masked inputs minus every recovered mask.
        acc = ring.accumulate(ring.zeros(length), masks, self._expander, plus=vectors)
        return AggregateResult(ring.finish(acc), u3, dropped, tuple(sorted(unmasked)))

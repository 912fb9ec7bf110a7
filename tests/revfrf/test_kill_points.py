"""Kill a RevFRF construction role at every message of one layer, restart it from its own
checkpoint files only, resume: the same forest (structure, providers, plaintext thresholds, missing
sides) and the same predictions, bit for bit.

Every delivery of the chosen layer (expansion and split requests) is a kill point, twice over: the
role dies before the message is handled (it is lost) or right after (the reply is lost); the role
is the CS (the sender) or the participant (the receiver).  A dead participant is rebuilt from its
checkpoint store; then the CS restores its latest layer checkpoint and grows the rest.  A
participant answers a repeated request byte for byte from its journal and refuses any other
request for a round it answered, and any request for an earlier round.  Planted companions: a
participant that ignores its journal answers a second, different expansion request for the same
round, and its request of round 0 again after the fit; one that checkpoints after its reply has
left loses what it answered when it dies right after the send (another forest).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from securetrees.errors import PartyUnavailable, UnexpectedMessage
from securetrees.protocols.revfrf.checkpoint import FORMAT
from securetrees.protocols.revfrf.cs import CentralServer
from securetrees.protocols.revfrf.cs_resume import resume_forest
from securetrees.protocols.revfrf.facade import make_proposer, plan_run
from securetrees.protocols.revfrf.messages import ExpandRequest, SplitRequest
from securetrees.protocols.revfrf.participant import Participant
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Message
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.signing import make_roster
from securetrees.testing.kill_points import Kill, KillNet
from securetrees.trees import make_criterion
from securetrees.trees.tree import Tree

from .helpers import PARTITION, make_data, small_kgc

X, Y = make_data(60, seed=5)
NAMES = ["u1", "u2", "u3"]
SETTINGS = {"n_estimators": 2, "max_depth": 3, "max_features": 3, "random_state": 11}
SESSION = b"s" * 16
KGC = small_kgc()
WEAK = {name: KGC.issue_weak_key(name) for name in ["cs", *NAMES]}
SHARE = KGC.strong_shares()[0]
VERIFY, SIGNING = make_roster(NAMES, rng=DeterministicRandom("roster"))


def _store(d: Path, name: str) -> CheckpointStore:
    return CheckpointStore(d, name, bytes([len(name)]) * 32, FORMAT, rng=DeterministicRandom(name))


def _participant(net: KillNet, d: Path, i: int, cls: type[Participant] = Participant) -> Participant:
    name, cols = NAMES[i], PARTITION[i]
    plan = plan_run(SETTINGS, *X.shape)
    return cls(name, net, columns=cols, X_own=X[:, cols], weak_key=WEAK[name], signing_key=SIGNING[name],
               session=SESSION, verify_keys=VERIFY, cs_key=WEAK["cs"].public,
               proposer=make_proposer(SETTINGS, X[:, cols], cols), ml_seed=plan.ml_seed + 1 + i, codec=plan.codec,
               holt_params=plan.holt, rng=DeterministicRandom(name), checkpoint=_store(d, name))


class Run:
    """The CS with its draws (rebuilt from the settings: the same seeds) and its store."""

    def __init__(self, net: KillNet, d: Path) -> None:
        plan = plan_run(SETTINGS, *X.shape)
        self.draws = plan.draws
        onehot = np.eye(int(Y.max()) + 1)[Y]
        stats = [onehot * dr.sample_weight[:, None] for dr in plan.draws]
        self.cs = CentralServer(
            "cs", net, share=SHARE, weak_key=WEAK["cs"], stats=stats,
            criterion=make_criterion("gini"), task="classification", grow=plan.grow,
            columns=dict(zip(NAMES, PARTITION, strict=True)), participant_keys={u: WEAK[u].public for u in NAMES},
            verify_keys=VERIFY, session=SESSION, n_features=X.shape[1], max_features=plan.max_features,
            ml_seed=plan.ml_seed, holt_params=plan.holt, rng=DeterministicRandom("cs"))
        self.store = _store(d, "cs")

    def resume(self) -> int:
        return resume_forest(self.cs, self.store, self.draws, [dr.sample_weight for dr in self.draws])


def _model(cs: CentralServer, parts: dict[str, Participant]) -> list[Tree] | None:
    """Each tree in the clear: the CS's structure with every provider's thresholds (tests only);
    ``None`` when a provider lost a node."""
    own = {key: node for p in parts.values() for key, node in p.own_nodes().items()}
    trees = []
    for t in cs.trees:
        if any((t.index, n.id) not in own for n in t.internal()):
            return None
        thr = {n.id: own[(t.index, n.id)].threshold for n in t.internal()}
        assert all(own[(t.index, n.id)].missing_left == n.missing_left for n in t.internal())
        trees.append(t.to_tree(X.shape[1], {u: k for k, u in enumerate(NAMES)}, thr))
    return trees


def _same(got: list[Tree] | None, want: list[Tree] | None) -> bool:
    return got is not None and want is not None and len(got) == len(want) and all(
        a.same_as(b) and np.array_equal(a.apply(X), b.apply(X)) for a, b in zip(got, want, strict=True))


def _uploads(cs: CentralServer) -> list[tuple[int, int, int, int, bytes]]:
    """Every split the CS holds as uploaded: ``[[s]]`` and the provider's signature."""
    return sorted((t.index, n.id, int(n.split.t1), int(n.split.t2), n.signature)
                  for t in cs.trees for n in t.internal() if n.split is not None)


def _reference(d: Path) -> tuple[list[Tree] | None, list[tuple[int, int, int, int, bytes]], KillNet]:
    net = KillNet()
    parts = {u: _participant(net, d, i) for i, u in enumerate(NAMES)}
    run = Run(net, d)
    layers = run.resume()
    assert layers == 4  # depth 3, then a pass over the leaves that splits nothing
    return _model(run.cs, parts), _uploads(run.cs), net


def _kill_everywhere(tmp: Path, cls: type[Participant] = Participant) -> tuple[list[bool], int]:
    """Per kill point of layer 2 (round 1): whether the resumed run gave the reference forest
    (every participant a ``cls``); and how many resumes repeated an answered request."""
    want, uploads, ref = _reference(tmp / "ref")
    assert want is not None
    window = [k for k, (_, _, msg) in enumerate(ref.log)
              if isinstance(msg, ExpandRequest | SplitRequest) and msg.round == 1]
    assert {type(ref.log[k][2]) for k in window} == {ExpandRequest, SplitRequest}
    kills = [Kill(k, who, after) for k in window for who in ref.log[k][:2] for after in (False, True)]
    same, repeated = [], 0
    for n, kill in enumerate(kills):
        d = tmp / str(n)
        net = KillNet(kill)
        parts = {u: _participant(net, d, i, cls) for i, u in enumerate(NAMES)}
        run = Run(net, d)
        with pytest.raises(PartyUnavailable):
            run.resume()
        if kill.victim == "cs":
            run = Run(net, d)
        else:
            parts[kill.victim] = _participant(net, d, NAMES.index(kill.victim), cls)
        start = len(net.log)
        try:
            run.resume()
        except UnexpectedMessage:
            same.append(False)
            continue
        # a restarted CS gets every split back as first uploaded (participants reply from their
        # journal, their encryption randomness untouched); a restarted participant draws afresh
        same.append(_same(_model(run.cs, parts), want) and (kill.victim != "cs" or _uploads(run.cs) == uploads))
        asked = {(r, msg.round) for _, r, msg in net.log[:start] if isinstance(msg, ExpandRequest)}
        repeated += any(isinstance(msg, ExpandRequest) and (r, msg.round) in asked for _, r, msg in net.log[start:])
    return same, repeated


def test_kill_any_role_at_any_message_of_a_layer_and_resume(tmp_path: Path) -> None:
    same, repeated = _kill_everywhere(tmp_path)
    assert len(same) >= 8 and all(same)
    assert repeated > 0  # some resumes repeated an answered request (answered from the journal)


class LateParticipant(Participant):
    """Planted fault: writes its checkpoint after the reply has left, so a death right after the
    send (every "after" kill here) loses what it answered."""

    def _journal_reply(self, kind: int, rnd: int, msg: Message, reply: Message) -> None:
        return None


def test_a_checkpoint_written_after_the_send_changes_the_forest(tmp_path: Path) -> None:
    """Planted companions: the same kills with participants that checkpoint after sending, and
    with participants that ignore their journal (a repeated request is encrypted afresh)."""
    same, _ = _kill_everywhere(tmp_path / "late", LateParticipant)
    assert not all(same)
    same, _ = _kill_everywhere(tmp_path / "forgetful", ForgetfulParticipant)
    assert not all(same)


def test_resume_without_a_checkpoint_starts_over(tmp_path: Path) -> None:
    want, _, _ = _reference(tmp_path / "ref")
    net = KillNet(Kill(0, "u1", after=False))
    parts = {u: _participant(net, tmp_path, i) for i, u in enumerate(NAMES)}
    run = Run(net, tmp_path)
    run.store.current.unlink(missing_ok=True)
    with pytest.raises(PartyUnavailable):
        run.resume()
    for p in run.store.current, run.store.previous:
        p.unlink(missing_ok=True)  # the CS died before its first layer: nothing to restore
    run = Run(net, tmp_path)
    run.resume()
    assert _same(_model(run.cs, parts), want)


# ---------------------------------------------------------------------------- single-use requests
class ForgetfulParticipant(Participant):
    """Planted leak: ignores the replies it journalled (as if it had lost its journal)."""

    def _answered(self, kind: int, rnd: int, msg: Message) -> bytes | None:
        return None


def _second_expansion_answered(tmp: Path, cls: type[Participant]) -> bool:
    """``u1`` is killed right after answering its expansion request of round 1 and restarted; the
    CS then asks it for round 1 over another sample selection (what a curious CS would ask to
    learn more candidate codes)."""
    _, _, ref = _reference(tmp / "ref")
    first = next(k for k, (_, r, msg) in enumerate(ref.log)
                 if r == "u1" and isinstance(msg, ExpandRequest) and msg.round == 1)
    net = KillNet(Kill(first, "u1", after=True))
    for i in range(len(NAMES)):
        _participant(net, tmp, i)
    with pytest.raises(PartyUnavailable):
        Run(net, tmp).resume()
    request = net.log[first][2]
    assert isinstance(request, ExpandRequest)
    u1 = _participant(net, tmp, 0, cls)
    same = u1.on_expand("cs", request)
    assert same.round == 1
    other = ExpandRequest(request.round, request.tree[:1], request.node[:1], request.offsets[:2] * 0 + [0, 1],
                          request.samples[:1], request.task_node[:1] * 0, request.task_column[:1])
    try:
        u1.on_expand("cs", other)
    except UnexpectedMessage:
        return False
    return True


def test_an_answered_round_is_not_answered_for_another_request(tmp_path: Path) -> None:
    assert not _second_expansion_answered(tmp_path / "journal", Participant)
    assert _second_expansion_answered(tmp_path / "forgetful", ForgetfulParticipant)  # planted companion


def _earlier_round_answered(tmp: Path, cls: type[Participant]) -> bool:
    """After the whole fit, ``u1`` (restarted from its checkpoint) is sent its expansion request of
    round 0 again, byte for byte (what a CS that started over instead of resuming would send): its
    journal holds the last round only, so answering would be a second, fresh answer for round 0."""
    _, _, ref = _reference(tmp)
    request = next(msg for _, r, msg in ref.log if r == "u1" and isinstance(msg, ExpandRequest) and msg.round == 0)
    u1 = _participant(KillNet(), tmp, 0, cls)
    try:
        u1.on_expand("cs", request)
    except UnexpectedMessage:
        return False
    return True


def test_a_round_before_the_journals_is_not_answered_again(tmp_path: Path) -> None:
    assert not _earlier_round_answered(tmp_path / "journal", Participant)
    assert _earlier_round_answered(tmp_path / "forgetful", ForgetfulParticipant)  # planted companion


def test_the_facade_with_a_checkpoint_folder_grows_the_same_forest(tmp_path: Path) -> None:
    from securetrees.errors import ParameterError

    from .helpers import classifier

    plain = classifier(partition=PARTITION).fit(X, Y)
    sealed = classifier(partition=PARTITION, checkpoint_dir=str(tmp_path)).fit(X, Y)
    want, got = plain.plaintext_forest(), sealed.plaintext_forest()
    assert all(a.same_as(b) for a, b in zip(want.trees, got.trees, strict=True))
    assert {p.name for p in tmp_path.glob("*.ckpt")} >= {"cs.ckpt", "u1.ckpt", "u2.ckpt", "u3.ckpt"}
    with pytest.raises(ParameterError, match="another fit"):
        classifier(partition=PARTITION, checkpoint_dir=str(tmp_path)).fit(X, Y)

"""A running role under hostile load from peers holding valid certificates (issue 28, part 4).

One bounded attack (``securetrees.protocols.histogram_forest.hostile_load``): stalled streams, 10,000 random frames,
1,000 frames at the size limit, 1,000 deeply nested bodies and 1,000 valid requests out of order
against ``client0`` while a histogram forest fits.  Every hostile call is refused, the fit ends
with the trees of the same fit without attack, memory stays within the stated bound, and each
(peer, kind) of refusal is logged once plus one summary.  Companions: a log that writes one line
per refusal fails the log check, and a server that waits for a request before admitting its
call is starved by the slow peer (its honest caller times out), where this one serves."""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from securetrees.errors import ParameterError, PeerTimeout
from securetrees.net import GrpcNetwork, Peer, TransportOptions
from securetrees.net import transport as transport_module
from securetrees.net.control import peak_rss_bytes
from securetrees.net.limits import CallSlots, RefusalLog, RequestTimer
from securetrees.net.tls import TlsIdentity
from securetrees.protocols.histogram_forest import hostile_load as hr
from securetrees.protocols.histogram_forest.client import Client
from securetrees.testing.hostile import FrameSender, SlowPeer, in_round, random_frames

FIRST = re.compile(r"refused a request from (\S+) \((\w+)\)")
MORE = re.compile(r"refused (\d+) more requests from (\S+) \((\w+)\), (\d+) in all")


def check_logged_once(messages: list[str], counts: dict[tuple[str, str], int], *, lines: int = 2) -> None:
    """Each (peer, kind) counted has exactly one first line, at most ``lines`` lines in all, and its
    later lines add up to its count."""
    firsts = Counter((m.group(1), m.group(2)) for m in map(FIRST.match, messages) if m)
    more: Counter[tuple[str, str]] = Counter()
    written = Counter(firsts)
    for m in filter(None, map(MORE.match, messages)):
        more[(m.group(2), m.group(3))] += int(m.group(1))
        written[(m.group(2), m.group(3))] += 1
    assert firsts == Counter(dict.fromkeys(counts, 1))
    assert {key: 1 + more[key] for key in counts} == counts
    assert max(written.values(), default=0) <= lines


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> tuple[hr.LoadRun, list[str]]:
    """The attack, once for the module, with the transport's log lines it produced."""
    lines = _Lines()
    logger = logging.getLogger("securetrees.net.transport")
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.WARNING)
    try:
        run = hr.run(tmp_path_factory.mktemp("hostile"))
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    return run, lines.lines


def test_the_fit_ends_with_the_unattacked_model(attacked: tuple[hr.LoadRun, list[str]]) -> None:
    run, _ = attacked
    assert hr.same_trees(run.trees, hr.reference_trees())


def test_every_hostile_call_is_refused_with_its_typed_status(attacked: tuple[hr.LoadRun, list[str]]) -> None:
    run, _ = attacked
    plan = hr.LoadPlan()
    sent = plan.sent()
    assert {load: sum(codes.values()) for load, codes in run.codes.items()} == {
        load: n for load, n in sent.items() if load != "slow_streams"}
    decode, late = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION
    # random frames: the codec's magic has probability 2^-16 per frame, and a frame past it is still
    # refused by the next header byte (version, tag, then a registered name): never OK in any case
    assert run.codes["random"] == Counter({decode: plan.random})
    assert run.codes["at_limit"] == Counter({decode: plan.at_limit})
    # gRPC's own refusal (10 oversized streams: far below the 100 a connection may hold open)
    assert run.codes["over_limit"] == Counter({grpc.StatusCode.RESOURCE_EXHAUSTED: plan.over_limit})
    assert run.codes["nested"] == Counter({decode: plan.nested})
    assert run.codes["out_of_order"] == Counter({late: plan.out_of_order})
    held = plan.calls_per_peer  # sloth: every stream reaches the handler, 8 are held
    assert run.slots_held == held
    assert run.refusals == {
        (hr.SLOW, "busy"): sent["slow_streams"] - held,
        (hr.HOSTILE, "DecodeError"): plan.random + plan.at_limit + plan.nested,
        (hr.HOSTILE, "UnexpectedMessage"): plan.out_of_order * 3 // 4,  # layer steps never due
        (hr.HOSTILE, "UnauthorizedSender"): plan.out_of_order // 4,  # replies sent as requests
    }


def test_memory_stays_within_the_stated_bound(attacked: tuple[hr.LoadRun, list[str]]) -> None:
    """Peak RSS growth of this process (roles, attackers and the fit) over the attack: the bound
    (3 x 8 slots x 5 parties x 1 MiB + 64 MiB = 184 MiB) is 4x the measured growth (about 42 MiB)."""
    run, _ = attacked
    assert 0 <= run.peak_growth <= hr.memory_bound(hr.LoadPlan())


def test_each_refusal_kind_is_logged_once_per_peer(attacked: tuple[hr.LoadRun, list[str]]) -> None:
    run, messages = attacked
    check_logged_once(messages, run.refusals)
    assert len(messages) == 2 * len(run.refusals)  # 13,056 refusals, 8 lines


def test_planted_a_line_per_refusal_fails_the_log_check(caplog: pytest.LogCaptureFixture) -> None:
    """The leaky log (a line per refusal: no interval) fails the same check on a few refusals."""
    log = RefusalLog(logging.getLogger("securetrees.net.transport"), interval=0.0)
    with caplog.at_level(logging.WARNING, logger="securetrees.net.transport"):
        for _ in range(5):
            log.note("mallory", "DecodeError", "bad magic")
        log.summarise()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 5
    with pytest.raises(AssertionError):
        check_logged_once(messages, log.counts())


def test_refusal_lines_are_spaced_by_the_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = RefusalLog(logging.getLogger("securetrees.net.transport"), interval=60.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="securetrees.net.transport"):
        for t in (0.0, 1.0, 59.0, 60.0, 61.0, 119.0, 130.0):
            now[0] = t
            log.note("mallory", "DecodeError", "x" * 1000)
        log.note("sloth", "busy", "too many")
        log.summarise()
        log.summarise()  # nothing new: no line
    messages = [r.getMessage() for r in caplog.records]
    assert messages[1:3] == ["refused 3 more requests from mallory (DecodeError), 4 in all",
                             "refused 3 more requests from mallory (DecodeError), 7 in all"]
    assert len(messages) == 4 and len(messages[0]) < 400  # the reason is cut short
    check_logged_once(messages, log.counts(), lines=3)  # the first, and a line each 60 s


def test_call_slots() -> None:
    slots = CallSlots(2)
    assert slots.enter("a") and slots.enter("a") and not slots.enter("a") and slots.enter("b")
    slots.leave("a")
    assert slots.held("a") == 1 and slots.enter("a")
    for bad in ({"max_calls_per_peer": 0}, {"max_streams_per_connection": 0}, {"refusal_log_seconds": -1.0},
                {"receive_window_bytes": 1024}, {"request_seconds": 0.0}, {"deadline": float("nan")}):
        with pytest.raises(ParameterError):
            TransportOptions(**bad)  # type: ignore[arg-type]
    assert TransportOptions(deadline=7.0).request_limit == 7.0  # by default, the caller's deadline
    assert TransportOptions(deadline=7.0, request_seconds=2.0).request_limit == 2.0


def test_request_timer() -> None:
    """A call stopped in time is never cancelled; one left runs its cancel once its time is up; the
    queue does not keep the calls stopped (a peer's fast calls cost no memory beyond those open)."""
    never = RequestTimer(1e6)
    tickets = [never.start(lambda: None) for _ in range(1000)]
    assert all(never.stop(t) for t in tickets) and len(never._due) <= 64
    never.close()
    timer = RequestTimer(0.01)
    for _ in range(2):  # and again after close (a server started anew)
        fired = threading.Event()
        ticket = timer.start(fired.set)
        assert fired.wait(60.0)  # an event, not a time bound
        assert not timer.stop(ticket)
        timer.close()


def _client0(ids: dict[str, TlsIdentity], roster: dict[str, Peer], options: TransportOptions
             ) -> tuple[GrpcNetwork, str]:
    """``client0`` served on a free port with ``options``; its network and address."""
    net = GrpcNetwork(ids["client0"], roster, options=options)
    X, y = hr.parts()[0]
    Client("client0", net, X, y, seed=1)
    return net, f"127.0.0.1:{net.start()}"


@pytest.mark.parametrize("planted", [False, True])
def test_a_stalled_request_gives_its_slot_back(tmp_path: Path, planted: bool) -> None:
    """sloth opens 12 streams whose requests never complete; 8 take its slots, the rest are refused
    (``busy``).  With ``request_seconds`` tiny, every admitted stream is cancelled when its time is
    up (``RequestTimeout``) and its slot comes back: the slots are free again once all 12 are counted.
    Planted: no limit on the request's time (a huge one): the slots stay held and the event never comes."""
    roster = {n: Peer("127.0.0.1:0", role=r) for n, r in hr.ROLES.items()}
    options = TransportOptions(deadline=30.0, retries=0, request_seconds=1e9 if planted else 0.05)
    ids = hr.identities(tmp_path)
    net, address = _client0(ids, roster, options)

    def slots_back() -> bool:
        counts = net.refusals.counts()
        return counts.get((hr.SLOW, "busy"), 0) + counts.get((hr.SLOW, "RequestTimeout"), 0) == 12 \
            and net.open_calls(hr.SLOW) == 0

    try:
        with SlowPeer(ids[hr.SLOW], address, "client0") as slow:
            slow.open(1, 12)
            if planted:
                hr.wait_until(lambda: net.refusals.counts().get((hr.SLOW, "busy"), 0) == 4, "the busy refusals")
                with pytest.raises(PeerTimeout):
                    hr.wait_until(slots_back, "the slots' return", limit=2.0)
                assert net.open_calls(hr.SLOW) == 8
            else:
                hr.wait_until(slots_back, "the slots' return")
                # every admitted stream was cancelled, at least the first 8 (more when a slot came back
                # before a later stream reached the server)
                assert net.refusals.counts()[(hr.SLOW, "RequestTimeout")] >= 8
    finally:
        net.close(grace=0)


class _NoFallback:
    """The planted server's last handler: none for an unknown method, so gRPC refuses it uncounted."""

    def __init__(self, network: GrpcNetwork) -> None:
        pass

    def service(self, handler_call_details: object) -> None:
        return None


@pytest.mark.parametrize("planted", [False, True])
def test_refusals_before_the_codec_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               planted: bool) -> None:
    """mallory calls ``client0`` naming another receiver (``NOT_FOUND``), without a request id, and on
    a method the server does not have (``UNIMPLEMENTED``): each refusal is counted under its kind.
    Planted: a server without the fallback handler leaves the unknown method to gRPC, uncounted."""
    if planted:
        monkeypatch.setattr(transport_module, "_UnknownMethods", _NoFallback)
    roster = {n: Peer("127.0.0.1:0", role=r) for n, r in hr.ROLES.items()}
    ids = hr.identities(tmp_path)
    net, address = _client0(ids, roster, TransportOptions(deadline=30.0, retries=0))
    mallory = ids[hr.HOSTILE]
    try:
        with FrameSender(mallory, address, "client0", max_bytes=1 << 20) as sender:
            wrong = sender.send(in_round(random_frames(5, 64)), receiver="client1")
            no_id = sender.send(in_round(random_frames(3, 64)), request_ids=False)
        with FrameSender(mallory, address, "client0", max_bytes=1 << 20, method="/securetrees.Party/Fit") as sender:
            unknown = sender.send(in_round(random_frames(2, 64)))
    finally:
        net.close(grace=0)
    assert wrong == Counter({grpc.StatusCode.NOT_FOUND: 5})
    assert no_id == Counter({grpc.StatusCode.INVALID_ARGUMENT: 3})
    assert unknown == Counter({grpc.StatusCode.UNIMPLEMENTED: 2})
    counted = {(hr.HOSTILE, "UnknownReceiver"): 5, (hr.HOSTILE, "DecodeError"): 3, (hr.HOSTILE, "UnknownMethod"): 2}
    assert (net.refusals.counts() == counted) is not planted


class ReadFirst:
    """The planted server: it waits for the request before it takes the call's slot (as gRPC's unary
    handlers do), so stalled streams hold its threads whoever sent them; ``waiting`` counts the
    threads so held."""

    def __init__(self, net: GrpcNetwork) -> None:
        self.net = net
        self.waiting = 0
        self._lock = threading.Lock()

    def __call__(self, serve: Callable[..., bytes]) -> Callable[..., bytes]:
        def admitted(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            with self._lock:
                self.waiting += 1
            request = next(requests)
            sender = self.net._peer_name(context)
            if not self.net._slots.enter(sender):
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy")
            try:
                return serve(request, context)
            finally:
                self.net._slots.leave(sender)
        return admitted


@pytest.mark.parametrize("planted", [False, True])
def test_a_slow_peer_does_not_starve_the_honest_ones(tmp_path: Path, planted: bool) -> None:
    """sloth opens more stalled streams than the server has threads (6 connections x 8 streams
    against 8 x 5 + 1 = 41 threads); once they have reached the server, the honest server's
    readiness call to client0 is answered (planted: every thread waits for a request that never
    comes, and the call times out)."""
    ids = hr.identities(tmp_path)
    roster = {n: Peer("127.0.0.1:0", role=r) for n, r in hr.ROLES.items()}
    # the stalled streams keep their slots through the test (their time limit has its own test)
    net = GrpcNetwork(ids["client0"], roster,
                      options=TransportOptions(deadline=30.0, retries=0, request_seconds=3600.0))
    threads = net.options.max_calls_per_peer * len(roster) + 1
    read_first = ReadFirst(net)
    if planted:
        net._admitted = read_first  # type: ignore[assignment]
    X, y = hr.parts()[0]
    Client("client0", net, X, y, seed=1)
    roster["client0"] = Peer(f"127.0.0.1:{net.start()}", role="client")
    honest = GrpcNetwork(ids["server"], roster, options=TransportOptions(deadline=30.0, retries=0))
    try:
        with SlowPeer(ids[hr.SLOW], roster["client0"].address, "client0") as slow:
            slow.open(6, 8)
            if planted:
                hr.wait_until(lambda: read_first.waiting == threads, "every server thread waiting")
                with pytest.raises(PeerTimeout):
                    honest.wait_for(["client0"], timeout=5.0)
            else:
                hr.wait_until(lambda: net.refusals.counts().get((hr.SLOW, "busy"), 0) == 48 - 8, "the busy refusals")
                honest.wait_for(["client0"], timeout=60.0)
                assert net.open_calls(hr.SLOW) == 8
    finally:
        honest.close()
        net.close(grace=0)


def test_a_refused_identity_is_counted_and_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A certificate of the federation's CA whose name the server's roster lacks: every call is
    refused (PERMISSION_DENIED), counted under its name, and logged once."""
    ids = hr.identities(tmp_path)
    roster = {n: Peer("127.0.0.1:0", role=r) for n, r in hr.ROLES.items() if n != hr.SLOW}
    net = GrpcNetwork(ids["client0"], roster, options=TransportOptions(deadline=30.0, retries=0))
    X, y = hr.parts()[0]
    Client("client0", net, X, y, seed=1)
    address = f"127.0.0.1:{net.start()}"
    try:
        with caplog.at_level(logging.WARNING, logger="securetrees.net.transport"), \
                FrameSender(ids[hr.SLOW], address, "client0", max_bytes=1 << 20) as sender:
            codes = sender.send(in_round(random_frames(20, 64)))
            net.close()
    finally:
        net.close()
    assert codes == Counter({grpc.StatusCode.PERMISSION_DENIED: 20})
    assert net.refusals.counts() == {(hr.SLOW, "AuthenticationError"): 20}
    check_logged_once([r.getMessage() for r in caplog.records], net.refusals.counts())


@pytest.mark.parametrize("planted", [False, True])
def test_planted_no_size_limit_breaks_the_memory_bound(tmp_path: Path, planted: bool) -> None:
    """mallory, from a child process, sends 8 frames of 64 MiB, 4 in flight.  The load's server
    (1 MiB limit) refuses them having read at most a 4 MiB window of each, and stays within the load's
    memory bound; the planted one (the default 256 MiB limit) takes each in: 4 x 64 MiB in flight, each
    held by gRPC and as the request's bytes, 512 MiB against the 184 MiB bound.  (Before the fixed
    window, gRPC's adaptive one let the load's server grow by 5 to 161 MiB here.)"""
    plan = hr.LoadPlan()
    ids = hr.identities(tmp_path)
    roster = {n: Peer("127.0.0.1:0", role=r) for n, r in hr.ROLES.items()}
    limit = TransportOptions().max_message_bytes if planted else plan.limit_bytes
    net = GrpcNetwork(ids["client0"], roster, options=TransportOptions(deadline=60.0, retries=0,
                                                                        max_message_bytes=limit))
    X, y = hr.parts()[0]
    Client("client0", net, X, y, seed=1)
    address = f"127.0.0.1:{net.start()}"
    try:
        base = hr.reset_peak()
        codes = hr.flood_from_child(tmp_path, address, frames=8, size=64 << 20, in_flight=4)
        growth = peak_rss_bytes() - base
    finally:
        net.close()
    assert codes == {"INVALID_ARGUMENT" if planted else "RESOURCE_EXHAUSTED": 8}
    assert (growth <= hr.memory_bound(plan)) is not planted

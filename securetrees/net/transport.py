"""A :class:`~securetrees.runtime.Network` over gRPC with mutual TLS: one role per process.

Service (``specs/deployment.md``): ``securetrees.Party/Deliver``, unary, raw bytes
both ways (no protobuf): the request is one wire-codec frame; the response is
``0x00`` (no reply) or ``0x01`` followed by the reply's binding to the request (32 bytes,
:func:`~securetrees.runtime.network.reply_binding`) and the reply's frame.  Metadata carries
the receiver's name, the sender's round number and the request's 16-byte random id (hex); the
*sender* is never taken from metadata but from the client certificate TLS authenticated.

Each side checks the other against the run's roster, where every name is bound
to the one CA of the bundle allowed to issue it: the server refuses a client
whose certificate name is not in the roster, whose certificate that CA did not
issue, or which does not match a pinned fingerprint, with ``PERMISSION_DENIED``;
the client trusts only the peer's CA as its root and connects with the peer's
roster name as the TLS target name, so a server presenting any other party's
certificate, or one minted for that name by another CA, fails the handshake.
The roster also gives each name its role: a message whose type that role may
not send is refused by :meth:`Network.receive` before the handler runs, and
comes back to the caller as :class:`UnauthorizedSender`.

Failures surface as the library's typed errors: a peer that cannot be reached
raises :class:`PartyUnavailable`, one that does not answer within the deadline
:class:`PeerTimeout`, a refused identity :class:`AuthenticationError`; an error
raised by the peer's handler is re-raised here as the same securetrees error
class (looked up by name among :mod:`securetrees.errors`, nothing else) or as
:class:`RemoteError`.  Messages marked ``idempotent`` are retried a bounded
number of times with exponential backoff after a transient failure.

Against hostile peers (``specs/deployment.md``, "Hostile peers"): each peer may have at most
``max_calls_per_peer`` calls open at the server, counted from the moment a stream opens; a call
whose request has not arrived within ``request_seconds`` is cancelled; and every refusal is counted
by peer and kind and logged once (:mod:`securetrees.net.limits`).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

import securetrees.errors as errors_module
from securetrees.errors import (
    AuthenticationError,
    DecodeError,
    PartyUnavailable,
    PeerTimeout,
    ProtocolError,
    RemoteError,
    SecureTreesError,
)
from securetrees.log import get_logger
from securetrees.net.limits import CallSlots, RefusalLog, RequestTimer
from securetrees.net.tls import TlsIdentity, bind_issuers, check_name, fingerprint, issued_by
from securetrees.runtime import codec
from securetrees.runtime.messages import Message, check_role
from securetrees.runtime.network import BINDING_BYTES, REQUEST_ID_BYTES, Network, new_request_id
from securetrees.runtime.transcript import Transcript

if TYPE_CHECKING:
    from securetrees.runtime.party import Party

__all__ = ["METHOD", "GrpcNetwork", "Peer", "TransportOptions"]

SERVICE: Final = "securetrees.Party"
METHOD: Final = f"/{SERVICE}/Deliver"
READY: Final = f"/{SERVICE}/Ready"
_NO_REPLY: Final = b"\x00"
_REPLY: Final = b"\x01"
_RECEIVER_KEY: Final = "st-receiver"
_ROUND_KEY: Final = "st-round"
_REQUEST_KEY: Final = "st-request"
_TRANSIENT: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
_READY_FIRST_PAUSE: Final = 0.005
"""Seconds between the first two readiness attempts of :meth:`GrpcNetwork.wait_for`; doubled after each."""
_READY_MAX_PAUSE: Final = 0.25
DEFAULT_MAX_MESSAGE_BYTES: Final = 256 << 20
"""``TransportOptions.max_message_bytes`` by default: 256 MiB (``specs/deployment.md``, "Hostile peers")."""


@dataclass(frozen=True)
class Peer:
    """A roster entry: where the party listens, optionally its pinned certificate, the CA
    allowed to issue its name (SHA-256 fingerprint of a CA of the bundle; required when the
    bundle holds several CAs, see :func:`~securetrees.net.tls.bind_issuers`), and its role
    (what the run's message declarations name; a party without one may send nothing)."""

    address: str
    fingerprint: str | None = None
    issuer: str | None = None
    role: str | None = None

    def __post_init__(self) -> None:
        if self.role is not None:
            check_role(self.role)


@dataclass(frozen=True)
class TransportOptions:
    """Deadlines, retries and limits (``run.toml``'s ``[transport]`` table sets any of them)."""

    deadline: float = 600.0
    """Seconds a call may take, including the peer's own nested calls (``long_running``
    messages, i.e. control requests that run a whole protocol phase, have none)."""
    retries: int = 3
    """Extra attempts for an idempotent message after a transient failure."""
    backoff: float = 0.2
    """First retry delay in seconds; doubles each attempt."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Bytes of one message (a request or a reply, its codec frame and the transport's few bytes);
    gRPC refuses a larger one (``specs/deployment.md``, "Hostile peers": the largest honest message
    of each protocol, and when to raise it)."""
    server_threads: int = 16
    keepalive_seconds: float = 10.0
    """HTTP/2 pings on open connections, so a dead peer is noticed during a long call."""
    max_calls_per_peer: int = 8
    """Calls one peer may have open at this server at once, from the opening of the stream (its
    request may still be arriving) to the reply; more are refused with ``RESOURCE_EXHAUSTED``.  The
    server has a thread for every slot of every roster party (an honest party has a few calls open
    to one peer at most: a fan-out sends one per peer, and the operator's long control calls)."""
    max_streams_per_connection: int = 100
    """HTTP/2's limit on the streams open at once on one connection (gRPC's default is unbounded).
    gRPC keeps a stream whose request exceeded ``max_message_bytes`` until its connection closes,
    so a connection that sent about this many oversized requests refuses further calls."""
    receive_window_bytes: int = 4 << 20
    """Bytes of a request a caller may send ahead of the server's reading it (HTTP/2 flow control,
    fixed: gRPC's adaptive windows let a peer push much of an oversized request into the server's
    memory before gRPC refuses it).  A stream carries at most this much per round trip."""
    refusal_log_seconds: float | None = 60.0
    """Least seconds between two log lines on refusals of one kind from one peer (None: the first
    line and the summary at close only); see :class:`~securetrees.net.limits.RefusalLog`."""
    request_seconds: float | None = None
    """Seconds a call's request may take to arrive, from the opening of its stream; a call still
    waiting for it then is cancelled, its slot freed and the refusal counted (``RequestTimeout``).
    None: the ``deadline``, past which an honest caller has given up on the call anyway (an honest
    request is never cut sooner; a ``long_running`` control call has no deadline, but a small request)."""

    def __post_init__(self) -> None:
        seconds = (self.deadline, self.backoff, self.keepalive_seconds, self.refusal_log_seconds, self.request_seconds)
        if not all(math.isfinite(t) for t in seconds if t is not None):
            raise errors_module.ParameterError("times must be finite numbers of seconds")
        if not (self.deadline > 0 and self.backoff >= 0 and self.keepalive_seconds > 0):
            raise errors_module.ParameterError("deadline and keepalive must be positive, backoff not negative")
        if self.retries < 0 or min(self.server_threads, self.max_calls_per_peer, self.max_streams_per_connection) < 1:
            raise errors_module.ParameterError(
                "retries must be >= 0; server_threads, max_calls_per_peer, max_streams_per_connection >= 1")
        if not 1 << 16 <= self.receive_window_bytes < 2**31:
            raise errors_module.ParameterError("receive_window_bytes must be in [64 KiB, 2^31)")
        if self.refusal_log_seconds is not None and not self.refusal_log_seconds >= 0:
            raise errors_module.ParameterError("refusal_log_seconds must be None or not negative")
        if not 0 < self.max_message_bytes < 2**31:
            raise errors_module.ParameterError("max_message_bytes must be in (0, 2^31)")
        if self.request_seconds is not None and not self.request_seconds > 0:
            raise errors_module.ParameterError("request_seconds must be None or positive")

    @property
    def request_limit(self) -> float:
        """Seconds a request may take to arrive: ``request_seconds``, else the ``deadline``."""
        return self.deadline if self.request_seconds is None else self.request_seconds

    def channel_args(self) -> list[tuple[str, Any]]:
        ka = int(self.keepalive_seconds * 1000)
        return [
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.keepalive_time_ms", ka),
            ("grpc.keepalive_timeout_ms", max(1000, ka // 2)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.http2.min_ping_interval_without_data_ms", max(1000, ka // 2)),
            ("grpc.enable_retries", 0),  # retries are ours: only idempotent messages
        ]

    def server_args(self) -> list[tuple[str, Any]]:
        """The server's options: the channel's, at most ``max_streams_per_connection`` streams open, and
        a fixed receive window of ``receive_window_bytes`` per stream."""
        return [*self.channel_args(), ("grpc.max_concurrent_streams", self.max_streams_per_connection),
                ("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", self.receive_window_bytes)]


def _listening(address: str) -> bool:
    """Whether a server already accepts connections on ``address`` (``host:port``; port 0 never).

    gRPC's servers bind with SO_REUSEPORT, so a role started twice would bind its address a second
    time without a word and take part of the role's calls: this is checked before binding (a port
    merely held, bound but not listening, refuses the connection and passes)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        if int(port) == 0:
            return False
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False


def _request_id(value: object) -> bytes | None:
    """The request id from its metadata value (hex), or None when missing or not 16 bytes."""
    if not isinstance(value, str) or len(value) != 2 * REQUEST_ID_BYTES:
        return None
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return None
    return raw if len(raw) == REQUEST_ID_BYTES else None  # fromhex skips spaces


def _error_from_status(peer: str, code: grpc.StatusCode, details: str) -> SecureTreesError:
    """The typed error a failed call raises at the caller."""
    if code == grpc.StatusCode.UNAVAILABLE:
        return PartyUnavailable(f"party {peer!r} is unreachable: {details}")
    if code == grpc.StatusCode.CANCELLED:  # its server stopped while the call was open
        return PartyUnavailable(f"party {peer!r} stopped while answering: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return PeerTimeout(f"party {peer!r} did not answer within the deadline")
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        return AuthenticationError(f"party {peer!r} refused this party: {details}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and not details.startswith("ProtocolError: "):
        return ProtocolError(f"message to or from {peer!r} exceeds the size limit: {details} (every party's "
                             "run.toml sets it: [transport] max_message_bytes)")
    # RESOURCE_EXHAUSTED with a ProtocolError: more calls open at the peer than it admits (below)
    type_name, _, text = details.partition(": ")
    cls = getattr(errors_module, type_name, None)
    if isinstance(cls, type) and issubclass(cls, SecureTreesError) and cls is not RemoteError:
        try:
            return cls(f"{text} (raised by {peer!r})")
        except TypeError:  # pragma: no cover - every securetrees error takes one message
            pass
    return RemoteError(f"{peer!r} failed: {details}", remote_type=type_name)


class GrpcNetwork(Network):
    """One process's end of a networked run: serves its own party, calls the others.

    ``identity`` is this process's TLS identity; ``roster`` maps every party of the
    run (this one included) to its :class:`Peer`.  Call :meth:`start` after the
    party is registered and :meth:`close` when done (also a context manager).

    The transcript records what *this* process's party received (requests and
    replies), so the union of every process's transcript is the in-process
    network's transcript of the same run; ``rounds`` counts the calls this party made.
    """

    def __init__(self, identity: TlsIdentity, roster: Mapping[str, Peer], *,
                 options: TransportOptions | None = None, transcript: Transcript | None = None,
                 keep_payloads: bool = True) -> None:
        self.identity = identity
        self.name = check_name(identity.name)
        self.roster = {check_name(n): p for n, p in roster.items()}
        if self.name not in self.roster:
            raise errors_module.ParameterError(f"{self.name!r} is not in the run's roster")
        self._issuers = bind_issuers(identity.ca_pem, {n: p.issuer for n, p in self.roster.items()})
        if not issued_by(x509.load_pem_x509_certificate(identity.cert_pem), self._issuers[self.name]):
            raise AuthenticationError(f"this party's certificate is not issued by the CA the roster binds "
                                      f"{self.name!r} to")
        self._verified: set[tuple[str, bytes]] = set()
        self.options = options or TransportOptions()
        self.transcript = transcript if transcript is not None else Transcript(keep_payloads=keep_payloads)
        self._party: Party | None = None
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._server: grpc.Server | None = None
        self._pool = ThreadPoolExecutor(max_workers=max(4, len(self.roster)), thread_name_prefix="st-call")
        self.port: int | None = None
        self._sent = 0  # codec-frame bytes this party sent: requests and replies
        self._slots = CallSlots(self.options.max_calls_per_peer)
        self._request_timer = RequestTimer(self.options.request_limit)
        self.refusals = RefusalLog(get_logger("net.transport"), interval=self.options.refusal_log_seconds)
        """Every request this server refused, by peer and kind (logged once per peer and kind)."""

    # ------------------------------------------------------------------ lifecycle
    def register(self, party: Party) -> None:
        if party.name != self.name:
            raise errors_module.ParameterError(
                f"this process's certificate is for {self.name!r}; it cannot host {party.name!r}")
        if self._party is not None:
            raise ProtocolError(f"{self.name!r} is already registered")
        if self.roster[self.name].role != party.role:
            raise errors_module.ParameterError(
                f"the roster gives {self.name!r} the role {self.roster[self.name].role!r}, not {party.role!r}")
        self._party = party

    def role_of(self, name: str) -> str | None:
        entry = self.roster.get(name)
        return None if entry is None else entry.role

    def start(self) -> int:
        """Listen on this party's roster address with mutual TLS; returns the bound port."""
        if self._server is not None:
            return self.port or 0
        # a thread for every call slot of every peer: a peer holding all its slots starves no other
        threads = max(self.options.server_threads, self.options.max_calls_per_peer * len(self.roster) + 1)
        server = grpc.server(ThreadPoolExecutor(max_workers=threads, thread_name_prefix="st-serve"),
                             options=self.options.server_args())
        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"Deliver": grpc.stream_unary_rpc_method_handler(self._admitted(self._serve)),
                      "Ready": grpc.stream_unary_rpc_method_handler(self._admitted(self._ready))})
        server.add_generic_rpc_handlers((handler, _UnknownMethods(self)))
        creds = grpc.ssl_server_credentials([(self.identity.key_pem, self.identity.cert_pem)],
                                            root_certificates=self.identity.ca_pem,
                                            require_client_auth=True)
        address = self.roster[self.name].address
        if _listening(address):  # gRPC binds with SO_REUSEPORT: a second server would share the port
            raise PartyUnavailable(f"{self.name}: cannot listen on {address}: the address is already in use (is "
                                   f"{self.name!r} already running? securetrees operator status tells)")
        try:
            port = server.add_secure_port(address, creds)
        except RuntimeError:  # recent grpcio raises where older ones returned 0
            port = 0
        if port == 0:
            raise PartyUnavailable(f"{self.name}: cannot listen on {address}: in use, or not this machine's")
        server.start()
        self._server, self.port = server, int(port)
        return int(port)

    @property
    def serving(self) -> bool:
        """Whether this network's server is started and not closed since."""
        return self._server is not None

    def close(self, grace: float | None = 1.0) -> None:
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
            self._request_timer.close()
            self.refusals.summarise()
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for ch in channels:
            ch.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def wait(self) -> None:
        """Block until the server stops (a role process's main loop)."""
        if self._server is not None:
            self._server.wait_for_termination()

    def __enter__(self) -> GrpcNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_for(self, peers: list[str], timeout: float) -> None:
        """Wait until every peer answers a readiness call (start-up); raises :class:`PeerTimeout`.

        The answer comes from the peer's started server hosting its party, so the peer is
        serving, not merely reachable: a channel that still looks connected to a process
        killed since is not taken for a live peer.  A call to a peer that is not serving fails
        at once; after it the channel is dropped, so the next attempt connects afresh instead
        of waiting out gRPC's reconnect backoff (a second), and the attempts are spaced by a
        pause that doubles from a few milliseconds up to a quarter of a second."""
        end = time.monotonic() + timeout
        for peer in peers:
            pause = _READY_FIRST_PAUSE
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    raise PeerTimeout(f"party {peer!r} did not come up within {timeout:g} s")
                try:
                    self._channel(peer).unary_unary(READY)(b"", timeout=min(left, 1.0), wait_for_ready=False)
                    break
                except grpc.RpcError as exc:
                    if exc.code() not in _TRANSIENT:
                        raise _error_from_status(peer, exc.code(), exc.details() or "") from None
                    self._drop_channel(peer)
                time.sleep(min(pause, max(end - time.monotonic(), 0.0)))
                pause = min(2 * pause, _READY_MAX_PAUSE)

    # ------------------------------------------------------------------ client side
    def _channel(self, peer: str) -> grpc.Channel:
        with self._lock:
            ch = self._channels.get(peer)
            if ch is None:
                entry = self.roster.get(peer)
                if entry is None:
                    raise PartyUnavailable(f"no party named {peer!r} in the run's roster")
                creds = grpc.ssl_channel_credentials(root_certificates=self._trusted_roots(peer),
                                                     private_key=self.identity.key_pem,
                                                     certificate_chain=self.identity.cert_pem)
                ch = grpc.secure_channel(entry.address, creds, options=[
                    *self.options.channel_args(), ("grpc.ssl_target_name_override", peer)])
                self._channels[peer] = ch
            return ch

    def _trusted_roots(self, peer: str) -> bytes:
        """The only root an outgoing connection to ``peer`` trusts: the CA bound to its name,
        so a server certificate for that name from any other CA of the bundle fails the handshake."""
        return self._issuers[peer].public_bytes(serialization.Encoding.PEM)

    def _drop_channel(self, peer: str) -> None:
        with self._lock:
            ch = self._channels.pop(peer, None)
        if ch is not None:
            ch.close()

    def _invoke(self, receiver: str, data: bytes, round_: int, kind: type[Message], request_id: bytes) -> bytes:
        stub = self._channel(receiver).unary_unary(METHOD)
        metadata = ((_RECEIVER_KEY, receiver), (_ROUND_KEY, str(round_)), (_REQUEST_KEY, request_id.hex()))
        attempts = 1 + (self.options.retries if kind.idempotent else 0)
        timeout = None if kind.long_running else self.options.deadline
        delay = self.options.backoff
        for attempt in range(attempts):
            try:
                reply: bytes = stub(data, timeout=timeout, metadata=metadata,
                                    wait_for_ready=False)
                return reply
            except grpc.RpcError as exc:
                code, details = exc.code(), exc.details() or ""
                if code == grpc.StatusCode.UNAVAILABLE:
                    # a channel that failed waits out gRPC's reconnect backoff; a peer that has come
                    # back (a restarted role) must be reachable at the next call, so start afresh
                    self._drop_channel(receiver)
                    stub = self._channel(receiver).unary_unary(METHOD)
                if code in _TRANSIENT and attempt + 1 < attempts:
                    time.sleep(delay)
                    delay *= 2
                    continue
                raise _error_from_status(receiver, code, details) from None
        raise PartyUnavailable(f"party {receiver!r} is unreachable")  # pragma: no cover

    def _deliver(self, round_: int, sender: str, receiver: str, msg: Message) -> Message | None:
        if sender != self.name:
            raise ProtocolError(f"this process speaks for {self.name!r}, not {sender!r}")
        if receiver == self.name:
            raise ProtocolError("a party does not call itself")
        data, request_id = codec.encode(msg), new_request_id()
        raw = self._invoke(receiver, data, round_, type(msg), request_id)  # a retry sends the same id
        self._count_sent(len(data))
        if raw == _NO_REPLY:
            return None
        if raw[:1] != _REPLY:
            raise DecodeError(f"malformed response from {receiver!r}")
        return self.accept_reply(round_, receiver, self.name, type(msg), request_id, data, raw[1:])

    def _new_round(self) -> int:
        with self._lock:
            return self.transcript.new_round()

    def call(self, sender: str, receiver: str, msg: Message) -> Message | None:
        return self._deliver(self._new_round(), sender, receiver, msg)

    def call_many(self, sender: str, requests: Mapping[str, Message], *, allow_missing: bool = False
                  ) -> dict[str, Message | None]:
        """The fan-out goes out in parallel (one round); replies come back by party."""
        round_ = self._new_round()
        futures = {r: self._pool.submit(self._deliver, round_, sender, r, m) for r, m in requests.items()}
        replies: dict[str, Message | None] = {}
        for receiver, fut in futures.items():
            try:
                replies[receiver] = fut.result()
            except PartyUnavailable:
                if not allow_missing:
                    raise
        return replies

    # ------------------------------------------------------------------ server side
    def _peer_name(self, context: grpc.ServicerContext) -> str:
        auth = context.auth_context()
        names = auth.get("x509_common_name") or []
        if len(names) != 1:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no client certificate name")
        name = names[0].decode("utf-8", "replace")
        entry = self.roster.get(name)
        pems = auth.get("x509_pem_cert") or []
        if entry is None:
            refusal = f"{name!r} is not in the run's roster"
        elif len(pems) != 1 or not self._issuer_ok(name, pems[0]):
            refusal = f"certificate of {name!r} is not issued by the CA the roster binds that name to"
        elif entry.fingerprint is not None and fingerprint(pems[0]) != entry.fingerprint.lower():
            refusal = f"certificate of {name!r} is not the pinned one"
        else:
            return str(name)
        self.refusals.note(name, AuthenticationError.__name__, refusal)
        context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
        raise AuthenticationError(refusal)  # pragma: no cover - abort raises

    def _issuer_ok(self, name: str, cert_pem: bytes) -> bool:
        """Whether the CA bound to ``name`` signed this client certificate directly (TLS has
        only checked that *some* CA of the bundle did).  Successes are remembered per name."""
        with self._lock:
            if (name, cert_pem) in self._verified:
                return True
        try:
            cert = x509.load_pem_x509_certificate(cert_pem)
        except ValueError:
            return False
        if not issued_by(cert, self._issuers[name]):
            return False
        with self._lock:
            self._verified.add((name, cert_pem))
        return True

    def _admitted(self, serve: Callable[[bytes, grpc.ServicerContext], bytes]
                  ) -> Callable[[Iterator[bytes], grpc.ServicerContext], bytes]:
        """``serve`` behind the per-peer call limit and the request's time limit.  Both methods are
        unary to callers; the server registers them as client-streaming so that this runs when the
        stream opens, before the request has arrived: gRPC's unary handlers wait for the request on a
        server thread without knowing the peer, so a peer that opens streams and never finishes a
        request would hold every thread.  A request that has not arrived within
        ``options.request_limit`` has its call cancelled, which ends the wait and frees the slot."""
        def admitted(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            sender = self._peer_name(context)
            if not self._slots.enter(sender):
                self.refusals.note(sender, "busy", f"more than {self._slots.per_peer} calls open at once")
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"ProtocolError: at most {self._slots.per_peer} calls open at once per party")
            try:
                ticket = self._request_timer.start(context.cancel)
                try:
                    request = next(requests, None)
                except grpc.RpcError:  # cancelled (by the peer, its connection closing, or the timer)
                    request = None
                if not self._request_timer.stop(ticket):
                    self.refusals.note(sender, "RequestTimeout", f"the request did not arrive within "
                                       f"{self.options.request_limit:g} s of its call")
                    return b""
                if request is None:  # not counted: an empty call, or one gRPC ended (a request over
                    # max_message_bytes, the peer's cancel, its connection lost), which this cannot tell apart
                    if context.is_active():
                        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "DecodeError: the call carries no request")
                    return b""
                return serve(request, context)
            finally:
                self._slots.leave(sender)
        return admitted

    def _refuse(self, context: grpc.ServicerContext, sender: str, code: grpc.StatusCode,
                error: SecureTreesError, kind: str | None = None) -> None:
        """Count the refusal of ``sender``'s call (under ``kind``, else the error's class name) and
        abort it with ``code`` and the error (its class name first, as the caller reads it)."""
        name = type(error).__name__
        self.refusals.note(sender, kind or name, str(error))
        context.abort(code, f"{name}: {error}")

    def _ready(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """Readiness, for roster members: answered once this server serves its party."""
        self._peer_name(context)
        if self._party is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.name!r} is not serving yet")
        return b""

    def _serve(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        sender = self._peer_name(context)
        meta = dict(context.invocation_metadata())
        receiver = meta.get(_RECEIVER_KEY)
        if receiver != self.name or self._party is None:
            self._refuse(context, sender, grpc.StatusCode.NOT_FOUND,
                         ProtocolError(f"this server hosts {self.name!r} only, not {str(receiver)[:64]!r}"),
                         "UnknownReceiver")
        try:
            round_ = int(meta.get(_ROUND_KEY, "0"))
        except ValueError:
            round_ = 0
        request_id = _request_id(meta.get(_REQUEST_KEY))
        if request_id is None:
            self._refuse(context, sender, grpc.StatusCode.INVALID_ARGUMENT,
                         DecodeError(f"a request carries a {REQUEST_ID_BYTES}-byte id in {_REQUEST_KEY!r}"))
        party = self._party
        if party is None or request_id is None:  # pragma: no cover - aborted above
            raise PartyUnavailable("no party")
        try:
            answer = self.answer(round_, sender, party, request_id, request)
        except SecureTreesError as exc:
            code = (grpc.StatusCode.INVALID_ARGUMENT if isinstance(exc, (DecodeError, errors_module.ParameterError))
                    else grpc.StatusCode.FAILED_PRECONDITION)
            self._refuse(context, sender, code, exc)
        except Exception as exc:  # the peer learns the type only, never a traceback
            self.refusals.note(sender, type(exc).__name__, "internal error")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: internal error")
        if answer is None:
            return _NO_REPLY
        self._count_sent(len(answer) - BINDING_BYTES)
        return _REPLY + answer

    def open_calls(self, peer: str) -> int:
        """Calls ``peer`` has open at this server now (at most ``max_calls_per_peer``)."""
        return self._slots.held(peer)

    def _count_sent(self, size: int) -> None:
        with self._lock:
            self._sent += size

    def bytes_sent(self, party: str) -> int:
        """Codec-frame bytes this process's party has sent (requests delivered, replies given);
        0 for any other party (its traffic is in its own process)."""
        return self._sent if party == self.name else 0


class _UnknownMethods:
    """Every method the server does not serve: the caller is authenticated (a stranger is refused
    and counted as any other), then refused with ``UNIMPLEMENTED`` and counted (``UnknownMethod``),
    without reading its request or taking a call slot (gRPC would refuse it uncounted).  gRPC asks
    each of the server's handlers in turn, this one last."""

    def __init__(self, network: GrpcNetwork) -> None:
        self._network = network

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = str(handler_call_details.method)

        def refuse(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
            self._network._refuse(context, self._network._peer_name(context), grpc.StatusCode.UNIMPLEMENTED,
                                  ProtocolError(f"no method {method[:64]!r} (this server has {METHOD!r} and "
                                                f"{READY!r})"), "UnknownMethod")
            return b""  # pragma: no cover - aborted
        return grpc.stream_unary_rpc_method_handler(refuse)

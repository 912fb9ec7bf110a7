"""A hostile peer for load tests: a party of the federation, holding a valid certificate, that floods
a running role over mutual TLS on loopback (tests and the ``hostile_load`` benchmark only).

Every load is bounded: a given number of frames, sent with a bounded number of calls in flight, or
a given number of streams held until :meth:`SlowPeer.close`.  The frames (``specs/deployment.md``,
"Hostile peers"):

- :func:`random_frames`: bytes with no structure (refused by the frame header);
- :func:`limit_frames`: frames of exactly the server's size limit behind a valid header naming a
  message the peer may send (refused while decoding the body); one byte more is refused by gRPC;
- :func:`nested_frames`: a valid header, then sequences nested far beyond the codec's depth limit;
- out-of-order requests: valid messages of the protocol, built by the caller, sent outside their phase;
- :class:`SlowPeer`: many HTTP/2 streams opened, each with a request that never completes, and
  nothing ever read from the connection (a gRPC client cannot do that: it reads for its calls).

The bytes are a pure function of a seed (SHAKE-256), so a run is reproducible; none is a secret.
"""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import tempfile
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

import grpc

from securetrees.net.tls import TlsIdentity
from securetrees.net.transport import METHOD
from securetrees.runtime import codec
from securetrees.runtime.codec import _varint
from securetrees.runtime.network import new_request_id

__all__ = ["FrameSender", "SlowPeer", "in_round", "limit_frames", "nested_frames", "random_frames"]

_SEQ: Final = 0x07
_MSG: Final = 0x0A
_NONE: Final = 0x00
_RECEIVER_KEY: Final = "st-receiver"
_ROUND_KEY: Final = "st-round"
_REQUEST_KEY: Final = "st-request"


def _bytes(seed: bytes, index: int, size: int) -> bytes:
    return hashlib.shake_256(seed + index.to_bytes(8, "big")).digest(size)


def _header(wire_type: str) -> bytearray:
    """A valid frame header up to the top-level message's wire type name."""
    name = wire_type.encode()
    out = bytearray(codec.MAGIC)
    out += bytes([codec.WIRE_VERSION, _MSG])
    _varint(len(name), out)
    out += name
    return out


def in_round(frames: Iterable[bytes], round_: str = "1") -> Iterator[tuple[bytes, str]]:
    """Each frame with the round it is sent under (:meth:`FrameSender.send`)."""
    return ((frame, round_) for frame in frames)


def random_frames(count: int, size: int, seed: bytes = b"random") -> Iterator[bytes]:
    """``count`` frames of ``size`` unstructured bytes (each starts with the codec's magic ``ST`` with
    probability 2^-16, and is a decodable message with far less)."""
    for i in range(count):
        yield _bytes(seed, i, size)


def limit_frames(count: int, size: int, wire_type: str, seed: bytes = b"limit") -> Iterator[bytes]:
    """``count`` frames of exactly ``size`` bytes: a valid header naming ``wire_type``, then filler."""
    header = _header(wire_type)
    for i in range(count):
        yield bytes(header) + _bytes(seed, i, size - len(header))


def nested_frames(count: int, depth: int, wire_type: str) -> Iterator[bytes]:
    """``count`` frames naming ``wire_type`` whose first field opens ``depth`` nested one-item sequences."""
    frame = bytes(_header(wire_type) + bytes([_SEQ, 1]) * depth + bytes([_NONE]))
    for _ in range(count):
        yield frame


class FrameSender:
    """Raw frames to ``target``'s ``Deliver`` method (or ``method``) as the party of ``identity``,
    bypassing the codec."""

    def __init__(self, identity: TlsIdentity, address: str, target: str, *, max_bytes: int,
                 method: str = METHOD) -> None:
        creds = grpc.ssl_channel_credentials(root_certificates=identity.ca_pem, private_key=identity.key_pem,
                                             certificate_chain=identity.cert_pem)
        self.target = target
        self._channel = grpc.secure_channel(address, creds, options=[
            ("grpc.max_send_message_length", max_bytes), ("grpc.max_receive_message_length", max_bytes),
            ("grpc.ssl_target_name_override", target), ("grpc.enable_retries", 0)])
        self._stub = self._channel.unary_unary(method)

    def send(self, calls: Iterable[tuple[bytes, str]], *, in_flight: int = 4, timeout: float = 120.0,
             receiver: str | None = None, request_ids: bool = True) -> Counter[grpc.StatusCode]:
        """Send each ``(frame, round)`` (the round as the ``st-round`` metadata, any text) with a fresh,
        well-formed request id (``st-request``: the attacker knows the transport; none if not
        ``request_ids``), to ``receiver`` (``st-receiver``; default the target), at most ``in_flight``
        calls open at once; the status code of every call."""
        codes: Counter[grpc.StatusCode] = Counter()
        pending: deque[grpc.Future] = deque()

        def settle(future: grpc.Future) -> None:
            try:
                future.result()
                codes[grpc.StatusCode.OK] += 1
            except grpc.RpcError as exc:
                codes[exc.code()] += 1

        for frame, round_ in calls:
            metadata = ((_RECEIVER_KEY, receiver or self.target), (_ROUND_KEY, round_),
                        *([(_REQUEST_KEY, new_request_id().hex())] if request_ids else []))
            pending.append(self._stub.future(frame, timeout=timeout, metadata=metadata))
            if len(pending) >= in_flight:
                settle(pending.popleft())
        for future in pending:
            settle(future)
        return codes

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> FrameSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- raw HTTP/2

_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _SETTINGS = 0x0, 0x1, 0x4
_END_HEADERS, _ACK = 0x4, 0x1
_INITIAL_WINDOW_SIZE: Final = 0x4


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _hpack_int(value: int) -> bytes:
    """HPACK's integer with a 7-bit prefix (RFC 7541, 5.1), the Huffman bit clear."""
    if value < 0x7F:
        return bytes([value])
    out, value = bytearray([0x7F]), value - 0x7F
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _hpack(headers: list[tuple[str, str]]) -> bytes:
    """A header block of literal fields without indexing, new names (RFC 7541, 6.2.2): no table state."""
    out = bytearray()
    for name, value in headers:
        out.append(0)
        for text in (name.encode(), value.encode()):
            out += _hpack_int(len(text)) + text
    return bytes(out)


class SlowPeer:
    """HTTP/2 connections over mutual TLS that open streams and never finish them, nor read anything.

    Each stream sends the headers of a ``Deliver`` call and the first bytes of a request announced
    as ``announced`` bytes long, then nothing; the peer announces a receive window of 0 and never
    reads the socket (it acknowledges the server's settings blindly)."""

    def __init__(self, identity: TlsIdentity, address: str, target: str) -> None:
        self.identity = identity
        host, _, port = address.rpartition(":")
        self.host, self.port, self.target = host.strip("[]") or "127.0.0.1", int(port), target
        self._sockets: list[ssl.SSLSocket] = []

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False  # the roster name is checked by the CA binding in the real client
        ctx.load_verify_locations(cadata=self.identity.ca_pem.decode("ascii"))
        ctx.set_alpn_protocols(["h2"])
        with tempfile.TemporaryDirectory() as folder:  # the ssl module loads a key from a file only
            cert, key = Path(folder, "cert.pem"), Path(folder, "key.pem")
            cert.write_bytes(self.identity.cert_pem)
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(self.identity.key_pem)
            ctx.load_cert_chain(cert, key)
        return ctx

    def open(self, connections: int, streams: int, *, announced: int = 1 << 20) -> None:
        """Open ``connections`` connections of ``streams`` stalled streams each."""
        ctx = self._context()
        block = _hpack([(":method", "POST"), (":scheme", "https"), (":path", METHOD),
                        (":authority", self.target), ("content-type", "application/grpc"), ("te", "trailers"),
                        (_RECEIVER_KEY, self.target), (_ROUND_KEY, "1")])
        start = b"\x00" + announced.to_bytes(4, "big") + b"ST"  # the message prefix, then 2 of its bytes
        for _ in range(connections):
            tls = ctx.wrap_socket(socket.create_connection((self.host, self.port)), server_hostname=self.target)
            self._sockets.append(tls)
            out = bytearray(_PREFACE)
            out += _frame(_SETTINGS, 0, 0, _INITIAL_WINDOW_SIZE.to_bytes(2, "big") + (0).to_bytes(4, "big"))
            out += _frame(_SETTINGS, _ACK, 0, b"")
            for s in range(streams):
                out += _frame(_HEADERS, _END_HEADERS, 2 * s + 1, block) + _frame(_DATA, 0, 2 * s + 1, start)
            tls.sendall(out)

    def close(self) -> None:
        for tls in self._sockets:
            tls.close()
        self._sockets.clear()

    def __enter__(self) -> SlowPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

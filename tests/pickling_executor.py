"""Test helpers for executors: a process boundary simulated in this process, and a leak detector.

:class:`PicklingExecutor` pickles every task it is given (as a process pool would) and keeps
the bytes; :func:`leaks` looks for a secret in them.  The tests of the batch functions and of
every role's executor path (``specs/batch_executors.md``) use both.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["PicklingExecutor", "leaks"]


class PicklingExecutor(Executor):
    """Runs each task here after a pickle round trip of ``(fn, args)``, as a process boundary
    would, and keeps every payload so that a test can look for secrets in it."""

    def __init__(self, workers: int = 2) -> None:
        self._max_workers = workers  # read by the chunking
        self.payloads: list[bytes] = []
        self.globals: set[str] = set()

    def record(self, payload: object) -> PicklingExecutor:
        self.payloads.append(pickle.dumps(payload))
        return self

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        data = pickle.dumps((fn, args, kwargs))
        self.payloads.append(data)
        recorder = self

        class Recording(pickle.Unpickler):
            def find_class(self, module: str, name: str) -> Any:
                recorder.globals.add(f"{module}.{name}")
                return super().find_class(module, name)

        fn2, args2, kwargs2 = Recording(io.BytesIO(data)).load()
        future: Future[Any] = Future()
        try:
            future.set_result(fn2(*args2, **kwargs2))
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def shipped_private_key(self) -> bool:
        """Did any task carry a private key (the only object whose pickle holds the factors)?"""
        return any("PrivateKey" in g or "private_key" in g for g in self.globals)


def _encodings(secret: int) -> list[bytes]:
    """The secret's bytes as pickle or gmpy2 could write them (both byte orders), trimmed to
    16 bytes from the middle so that a length prefix or sign byte does not hide it."""
    width = (secret.bit_length() + 7) // 8
    out = []
    for order in ("big", "little"):
        raw = secret.to_bytes(width, order)
        mid = len(raw) // 2
        out.append(raw[max(0, mid - 8) : mid + 8])
    return out


def leaks(executor: PicklingExecutor, *secrets: int) -> bool:
    """Does any payload the executor received contain one of ``secrets``?"""
    return any(e in payload for payload in executor.payloads for s in secrets for e in _encodings(s))

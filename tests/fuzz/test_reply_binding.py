"""Fuzzing the caller's side of a reply: ``Network.accept_reply`` on mutated answers.

Whatever comes back (the answer to a real request with bits flipped, cut, extended or spliced,
or arbitrary bytes), the caller accepts it, or raises a SecureTreesError; and it never accepts
an answer whose binding differs from the one it computed for its request.  The binding itself
separates its inputs: two different (caller, replier, request id, request) tuples never hash
alike, however their bytes split (the length prefixes).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import assume, given
from hypothesis import strategies as st

from securetrees.errors import SecureTreesError
from securetrees.runtime import InProcessNetwork, Message, Party, handles, message
from securetrees.runtime.codec import encode
from securetrees.runtime.network import BINDING_BYTES, REQUEST_ID_BYTES, new_request_id, reply_binding
from securetrees.testing.fuzzing import bytes_inputs


@message("test.fuzzbind.ask", sender="asker", receiver="answerer")
@dataclass(frozen=True)
class Ask(Message):
    x: int


@message("test.fuzzbind.answer", reply_to=Ask)
@dataclass(frozen=True)
class Answer(Message):
    y: int
    note: str


class Answerer(Party):
    role = "answerer"

    @handles(Ask)
    def on_ask(self, sender: str, msg: Ask) -> Answer:
        return Answer(msg.x + 1, "fine")


class Asker(Party):
    role = "asker"


NET = InProcessNetwork()
Asker("a", NET)
ANSWERER = Answerer("b", NET)
REQUEST = encode(Ask(41))
REQUEST_ID = new_request_id()
VALID = NET.answer(1, "a", ANSWERER, REQUEST_ID, REQUEST)
assert VALID is not None


@given(bytes_inputs(VALID))
def test_mutated_answers_are_typed_and_never_unbound(answer: bytes) -> None:
    try:
        reply = NET.accept_reply(1, "b", "a", Ask, REQUEST_ID, REQUEST, answer)
    except SecureTreesError:
        return
    assert answer[:BINDING_BYTES] == VALID[:BINDING_BYTES]  # accepted only with the request's binding
    assert isinstance(reply, Answer)


names = st.text(min_size=1, max_size=6)
inputs = st.tuples(names, names, st.binary(min_size=REQUEST_ID_BYTES, max_size=REQUEST_ID_BYTES),
                   st.binary(max_size=24))


@given(inputs, inputs)
def test_different_inputs_never_share_a_binding(one: tuple[str, str, bytes, bytes],
                                                other: tuple[str, str, bytes, bytes]) -> None:
    assume(one != other)
    assert reply_binding(*one) != reply_binding(*other)


@given(st.text(min_size=2, max_size=8), st.integers(1, 7))
def test_moving_bytes_between_the_names_changes_the_binding(text: str, cut: int) -> None:
    assume(cut < len(text))
    split = (text[:cut], text[cut:])
    assert reply_binding(*split, REQUEST_ID, REQUEST) != reply_binding(text, "", REQUEST_ID, REQUEST)
    assert reply_binding(split[0], "b", REQUEST_ID, REQUEST) != reply_binding(split[0] + "b", "", REQUEST_ID, REQUEST)

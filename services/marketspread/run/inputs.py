"""The run's input files: checked to be fixish before anything starts, and what they should produce.

The expectation comes from the independent reference model (`marketspread.reference`), fed in
the order the job is meant to apply the messages: each file to completion when sequential;
otherwise the initial NBBO first, then both streams merged by intended send time with NBBO
first on a tie, exactly as the job orders one micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import MarketSpreadError
from ..fixish import Nbbo, Order, OrderResult, decode, decode_records, split_frames
from ..reference import ReferenceModel

__all__ = ["InputError", "InputFile", "load_input", "expected_results"]


class InputError(MarketSpreadError):
    pass


@dataclass(frozen=True)
class InputFile:
    path: Path
    kind: type  # Nbbo or Order
    messages: list

    def __len__(self) -> int:
        return len(self.messages)


def load_input(path: str | Path, kind: type) -> InputFile:
    """Read a framed fixish file of one message kind; anything else is an InputError naming the problem."""
    path = Path(path)
    what = "NBBO" if kind is Nbbo else "order"
    try:
        buffer = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read {what} file {path}: {error.strerror}") from None
    decoded = decode_records([buffer], framed=True)
    if decoded.failures:
        first = decoded.failures[0]
        raise InputError(f"{path} is not a framed fixish file: {first.reason.value} at byte {first.offset} "
                         f"({first.detail}); {len(decoded.failures)} bad part(s) in all")
    wrong = len(decoded.orders) if kind is Nbbo else len(decoded.nbbo)
    if wrong:
        raise InputError(f"{path} should hold only {what} messages but holds {wrong} of the other kind")
    if not decoded.message_count:
        raise InputError(f"{path} holds no messages")
    return InputFile(path, kind, [decode(payload) for payload in split_frames(buffer)])


def expected_results(initial: InputFile, nbbo: InputFile, orders: InputFile, sequential: bool,
                     batch_size: int) -> list[OrderResult]:
    model = ReferenceModel()
    model.feed(initial.messages)
    if sequential:
        model.feed(nbbo.messages)
        return model.feed(orders.messages)
    # Both senders share t0, rate and batch size, so batch k of each stream has the same intended
    # send time; the job applies equal times NBBO first.
    merged: list[Nbbo | Order] = []
    batches = max(len(nbbo), len(orders)) // batch_size + 1
    for k in range(batches):
        merged += nbbo.messages[k * batch_size:(k + 1) * batch_size]
        merged += orders.messages[k * batch_size:(k + 1) * batch_size]
    return model.feed(merged)

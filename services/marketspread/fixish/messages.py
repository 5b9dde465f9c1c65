"""The three Market Spread messages as Python values (one at a time; buffers use numpy, see bulk.py)."""

from __future__ import annotations

from dataclasses import dataclass

from .layout import Side

__all__ = ["Nbbo", "Order", "OrderResult", "Message"]


@dataclass(frozen=True, slots=True)
class Nbbo:
    """National best bid and offer for one symbol (symbols are kept unpadded: "NI", not "  NI")."""

    symbol: str
    bid_px: float
    offer_px: float
    transact_time: str = "19700101-00:00:00.000"


@dataclass(frozen=True, slots=True)
class Order:
    side: Side
    account: int
    order_id: str
    symbol: str
    order_qty: float
    price: float
    transact_time: str = "19700101-00:00:00.000"


@dataclass(frozen=True, slots=True)
class OrderResult:
    """An order that must be withdrawn, with the quote that condemned it.

    `timestamp` is the order's intended send time in ns since the epoch (Wallaroo put its own
    wall clock there); the receiver measures end-to-end latency against it.
    """

    side: Side
    account: int
    order_id: str
    symbol: str
    order_qty: float
    price: float
    bid: float
    offer: float
    timestamp: int

    @classmethod
    def of(cls, order: Order, bid: float, offer: float, timestamp: int) -> "OrderResult":
        return cls(order.side, order.account, order.order_id, order.symbol, order.order_qty, order.price,
                   bid, offer, timestamp)

    def identity(self) -> tuple:
        """Everything but the timestamp: how Wallaroo's validator compared results."""
        return (self.side, self.account, self.order_id, self.symbol, self.order_qty, self.price, self.bid,
                self.offer)


Message = Nbbo | Order

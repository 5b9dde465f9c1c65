"""The fixish wire format of Wallaroo's Market Spread: one codec for every component."""

from .bulk import (
    NBBO_EVENT,
    ORDER_EVENT,
    SEQ_RECORD_SHIFT,
    DecodedBatch,
    DecodeFailure,
    decode_order_results,
    decode_records,
    encode_nbbos,
    encode_order_results,
    encode_orders,
    split_fixed,
)
from .codec import decode, decode_order_result, encode, encode_order_result, frame, frame_all, iter_frames, split_frames
from .errors import FixishError, Reason
from .layout import FRAME_SIZE, NBBO, ORDER, ORDER_RESULT, MessageType, Side
from .messages import Message, Nbbo, Order, OrderResult
from .symbols import pad_symbol, unpad_symbol, valid_symbols

__all__ = [
    "NBBO", "ORDER", "ORDER_RESULT", "FRAME_SIZE", "MessageType", "Side",
    "Nbbo", "Order", "OrderResult", "Message",
    "FixishError", "Reason",
    "encode", "decode", "encode_order_result", "decode_order_result", "frame", "frame_all", "iter_frames",
    "split_frames",
    "NBBO_EVENT", "ORDER_EVENT", "SEQ_RECORD_SHIFT", "DecodedBatch", "DecodeFailure", "decode_records",
    "encode_nbbos", "encode_orders", "encode_order_results", "decode_order_results", "split_fixed",
    "pad_symbol", "unpad_symbol", "valid_symbols",
]

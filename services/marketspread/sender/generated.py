"""Generated streams (marketspread.generate): the same seeded messages `marketspread generate` writes."""

from __future__ import annotations

from ..fixish import MessageType
from .settings import SenderSettings
from .source import ChunkSource

__all__ = ["generated_source", "GENERATE_CHUNK"]

# Messages generated per numpy call; chunking never changes the stream, only the call overhead.
GENERATE_CHUNK = 50_000


def generated_source(settings: SenderSettings, kind: MessageType) -> ChunkSource:
    from ..generate import NbboStream, OrderStream, load_symbol_set, stream_rngs

    symbol_set = load_symbol_set(settings.symbols)
    nbbo_rng, orders_rng = stream_rngs(settings.seed)
    if kind is MessageType.NBBO:
        stream = NbboStream(symbol_set, nbbo_rng)
    else:
        stream = OrderStream(symbol_set, orders_rng, reject_ratio=settings.reject_ratio)
    chunk = max(GENERATE_CHUNK, settings.batch_size)
    return ChunkSource(stream.chunks(chunk), kind,
                       description=f"generated {kind.name} on {symbol_set.describe()}, seed {settings.seed}")

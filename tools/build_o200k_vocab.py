"""Build lamina/data/o200k_base.bpe from OpenAI's o200k_base.tiktoken.

Not part of the package; run by hand:

    python tools/build_o200k_vocab.py o200k_base.tiktoken[.gz] lamina/data/o200k_base.bpe

The tiktoken file holds one `<token in base64> <rank>` line per token. The ranks of o200k_base
are 0 to 199,997 in file order, so the packed file keeps only the tokens, in that order:

    b"LAMINA-BPE 1\\n", the count (4 bytes, little-endian), one byte per token for its length
    (no o200k token is longer than 128 bytes), then the tokens' bytes back to back.

Reading it is slicing one bytes object; decoding 200k base64 lines and numbers took four times
as long, in every process that counts tokens. `tests/test_tokens.py` turns the packed file
back into the tiktoken file and checks it against the SHA-256 that OpenAI publishes with it.
"""

from __future__ import annotations

import base64
import gzip
import struct
import sys
from pathlib import Path

MAGIC = b"LAMINA-BPE 1\n"


def main(source: Path, target: Path) -> None:
    data = source.read_bytes()
    if source.suffix == ".gz":
        data = gzip.decompress(data)
    tokens: list[bytes] = []
    for rank, line in enumerate(data.splitlines()):
        token, number = line.split()
        if int(number) != rank:
            raise SystemExit(f"{source}: line {rank + 1} has rank {int(number)}, not {rank}")
        tokens.append(base64.b64decode(token))
    if max(map(len, tokens)) > 255:
        raise SystemExit(f"{source}: a token is longer than 255 bytes")
    packed = MAGIC + struct.pack("<I", len(tokens)) + bytes(map(len, tokens)) + b"".join(tokens)
    target.write_bytes(packed)
    print(f"{target}: {len(tokens)} tokens, {len(packed)} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))

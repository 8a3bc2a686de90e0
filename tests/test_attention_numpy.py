"""Claims of 第 7 讲 §2–§3 about single-head attention, checked on the numpy implementation."""

from __future__ import annotations

import numpy as np
import pytest

from transformer_book.attention_numpy import (
    attention,
    causal_mask,
    scaling_study,
    self_attention,
    self_attention_loop,
    soft_lookup,
    softmax,
    softmax_jacobian,
)

KEYS = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
VALUES = np.array([10.0, 20.0, 30.0])


@pytest.mark.parametrize(
    "query, weights, output",
    [
        ((10, 0), ("0.953", "0.000", "0.047"), "10.95"),
        ((1, 0), ("0.474", "0.174", "0.351"), "18.77"),
        ((0.5, 0.5), ("0.310", "0.310", "0.379"), "20.69"),
    ],
)
def test_soft_lookup_gives_the_lectures_weights_and_outputs(query, weights, output) -> None:
    w, o = soft_lookup(np.array(query, float), KEYS, VALUES)
    assert tuple(f"{x:.3f}" for x in w) == weights
    assert f"{o:.2f}" == output


def test_the_loop_and_the_matrix_form_of_self_attention_agree() -> None:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((5, 4))
    W = [rng.standard_normal((4, 3)) for _ in range(3)]
    np.testing.assert_allclose(self_attention(X, *W).output, self_attention_loop(X, *W), atol=1e-12)


def test_attention_weights_are_rows_that_sum_to_one() -> None:
    rng = np.random.default_rng(2)
    trace = self_attention(rng.standard_normal((6, 4)), *(rng.standard_normal((4, 3)) for _ in range(3)))
    np.testing.assert_allclose(trace.weights.sum(axis=-1), 1.0)


def test_the_causal_mask_zeroes_the_future_and_changing_the_last_token_leaves_earlier_outputs() -> None:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((4, 4))
    W = [rng.standard_normal((4, 3)) for _ in range(3)]
    mask = causal_mask(4)
    a = self_attention(X, *W, mask=mask)
    assert np.all(a.weights[np.triu_indices(4, k=1)] == 0)
    X2 = X.copy()
    X2[-1] = rng.standard_normal(4)
    b = self_attention(X2, *W, mask=mask)
    np.testing.assert_array_equal(a.output[:-1], b.output[:-1])


def test_a_fully_masked_row_gives_zeros_not_nan() -> None:
    Q = K = V = np.ones((2, 3))
    mask = np.array([[True, True], [False, False]])
    out, weights, _ = attention(Q, K, V, mask)
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(weights[1], 0.0)


def test_softmax_jacobian_matches_finite_differences() -> None:
    e = np.array([0.3, -1.2, 2.0, 0.5])
    eps = 1e-6
    numeric = np.stack([(softmax(e + eps * np.eye(4)[j]) - softmax(e - eps * np.eye(4)[j])) / (2 * eps) for j in range(4)], axis=1)
    np.testing.assert_allclose(softmax_jacobian(softmax(e)), numeric, atol=1e-8)


def test_dot_products_have_standard_deviation_sqrt_dk_and_scaling_keeps_softmax_unsaturated() -> None:
    rows = scaling_study([4, 64, 1024], n_trials=2000, rng=np.random.default_rng(0))
    for r in rows:
        assert r.dot_std == pytest.approx(np.sqrt(r.d_k), rel=0.05)
    unscaled = [r.max_weight_unscaled for r in rows]
    assert unscaled == sorted(unscaled) and unscaled[-1] > 0.95
    grads = [r.grad_norm_unscaled for r in rows]
    assert grads == sorted(grads, reverse=True) and grads[0] / grads[-1] > 5
    scaled = [r.max_weight_scaled for r in rows]
    assert max(scaled) - min(scaled) < 0.03

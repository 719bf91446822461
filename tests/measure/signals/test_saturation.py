"""The logit lens reads the right residual streams, and the ROC arithmetic is right."""
import numpy as np
import pytest
import torch

from labkit import SkipSet, skipping
from labkit.measure.signals.saturation import (
    CALM_SIGNALS,
    bootstrap_auc,
    exit_signal_rocs,
    fit_exit_classifier,
    lens_logits,
    measure_saturation,
    residual_states,
    roc_auc,
    roc_curve,
    stage_labels,
)

from tiny_models import ARCHITECTURES, ToyTokenizer, tiny_model

N_LAYERS = 3


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_stages_are_the_residual_stream_after_each_block(arch):
    model = tiny_model(arch, n_layers=N_LAYERS, vocab_size=97)
    ids = torch.randint(0, 97, (1, 9), generator=torch.Generator().manual_seed(0))
    states = residual_states(model, ids)
    assert states.shape == (2 * N_LAYERS + 1, 9, model.config.hidden_size)
    with torch.no_grad():
        full = model(ids, output_hidden_states=True)
        torch.testing.assert_close(lens_logits(model, states[-1]), full.logits[0], rtol=1e-4, atol=1e-4)
        for layer in range(N_LAYERS):
            # the state after layer l's attention = layer l's output when its MLP block is skipped
            with skipping(model, SkipSet(mlp=[layer])):
                skipped = model(ids, output_hidden_states=True).hidden_states
            last = layer == N_LAYERS - 1                # the last entry of hidden_states is after the final norm
            read = (lambda h: model.model.norm(h)) if last else (lambda h: h)
            torch.testing.assert_close(read(states[2 * layer + 1]), skipped[layer + 1][0], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(read(states[2 * layer + 2]), full.hidden_states[layer + 1][0],
                                       rtol=1e-5, atol=1e-5)
    assert stage_labels(2) == ["embeddings", "0 attn", "0 mlp", "1 attn", "1 mlp"]


def test_measure_saturation_shapes_and_invariants():
    model = tiny_model("llama", n_layers=N_LAYERS, vocab_size=97)
    sat = measure_saturation(model, ToyTokenizer(), ["def f(x):", "return a + b"], max_new_tokens=10, name="tiny",
                             progress=False)
    n, s = len(sat.tokens), 2 * N_LAYERS + 1
    assert n == 20 and sat.top1.shape == sat.p_final.shape == sat.cos_last.shape == (n, s)
    assert sat.saturated[:, -1].all() and np.allclose(sat.cos_last[:, -1], 1.0, atol=1e-5)
    assert (sat.settled <= sat.saturated).all() and (np.diff(sat.settled.astype(int), axis=1) >= 0).all()
    assert np.isnan(sat.cos_prev_layer[:, 0]).all() and sat.cos_prev_layer.shape == (n, N_LAYERS + 1)
    assert ((sat.gap >= 0) & (sat.gap <= sat.p_max)).all() and (sat.p_final <= sat.p_max + 1e-6).all()
    assert sat.exit_alpha()[N_LAYERS] == 1.0 and set(sat.exit_alpha()) == {1, 2, 3}
    assert sat.layer_states.shape == (n, N_LAYERS + 1, model.config.hidden_size)
    rocs = exit_signal_rocs(sat, classifier=fit_exit_classifier(sat), n_boot=50)
    assert set(rocs) == set(CALM_SIGNALS)
    for roc in rocs.values():
        assert 0.0 <= roc["auc"] <= 1.0 and roc["fpr"][0] == 0.0 and roc["tpr"][-1] == 1.0
        assert roc["auc_low"] <= roc["auc"] + 1e-9 or np.isnan(roc["auc_low"])
    assert set(exit_signal_rocs(sat, n_boot=0)) == {"softmax response", "state saturation"}   # no classifier given
    with pytest.raises(ValueError, match="prompt_texts"):
        measure_saturation(model, ToyTokenizer(), [], progress=False)


def test_roc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score
    from sklearn.metrics import roc_curve as sk_roc

    rng = np.random.default_rng(0)
    labels = rng.random(300) < 0.4
    scores = np.round(rng.random(300) + 0.3 * labels, 1)         # rounded: many ties
    fpr, tpr, _ = roc_curve(scores, labels)
    sk_fpr, sk_tpr, _ = sk_roc(labels, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr)
    np.testing.assert_allclose(tpr, sk_tpr)
    assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert roc_auc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    with pytest.raises(ValueError, match="both classes"):
        roc_curve([0.1, 0.2], [1, 1])


def test_exit_classifier_learns_a_separable_signal_and_bootstrap_brackets_the_auc():
    """A state whose first coordinate says 'right' is learnt (held-out AUC near 1), and the AUC's bootstrap
    interval is narrow for many tokens and contains the point estimate."""
    from labkit.measure.signals.saturation import Saturation

    rng = np.random.default_rng(0)
    n, layers, h = 200, 3, 4

    def sat(seed):
        r = np.random.default_rng(seed)
        right = r.random((n, layers + 1)) < 0.5
        right[:, -1] = True
        states = r.normal(size=(n, layers + 1, h))
        states[..., 0] += 3 * right
        tokens = np.arange(n)
        top1 = np.repeat(tokens[:, None], 2 * layers + 1, axis=1)
        for e in range(layers + 1):
            top1[~right[:, e], 2 * e] = -1
        nan = np.full((n, 2 * layers + 1), np.nan)
        return Saturation("toy", layers, tokens, np.zeros(n, int), top1, nan, nan, r.random((n, 2 * layers + 1)),
                          nan, r.random((n, layers + 1)), layer_states=states)

    clf = fit_exit_classifier(sat(1))
    rocs = exit_signal_rocs(sat(2), classifier=clf, n_boot=100)
    assert rocs["exit classifier"]["auc"] > 0.9 and abs(rocs["softmax response"]["auc"] - 0.5) < 0.1
    low, high = rocs["exit classifier"]["auc_low"], rocs["exit classifier"]["auc_high"]
    assert low <= rocs["exit classifier"]["auc"] <= high and high - low < 0.1
    scores, labels = rng.random((50, 2)), rng.random((50, 2)) < 0.5
    assert bootstrap_auc(scores, labels, n_boot=20, seed=3) == bootstrap_auc(scores, labels, n_boot=20, seed=3)

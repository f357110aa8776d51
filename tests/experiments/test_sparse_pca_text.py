"""The sparse PCA text experiment (d'Aspremont et al., the NYTimes-style topics) in quick mode."""

from __future__ import annotations

from bayeskit.experiments import sparse_pca_text


def test_text_experiment_recovers_the_planted_topics(tmp_path, monkeypatch):
    monkeypatch.setattr(sparse_pca_text, "zipf_corpus",
                        lambda n, w, **kw: __import__("bayeskit").datasets.zipf_corpus(600, 3000, **kw))
    out = sparse_pca_text.run(tmp_path, quick=True)
    assert out["topics_recovered"] == 5
    assert all(len(c["words"]) == 5 for c in out["components"])


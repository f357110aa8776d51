"""Large-scale sparse PCA on a document-term matrix (Zhang & El Ghaoui 2011, Section 5): the
top five sparse components of cardinality 5, each from safe feature elimination and block
coordinate ascent on the surviving words, later ones after projection deflation.

No large public bag-of-words corpus is available offline here, so the data are a synthetic
corpus (``bayeskit.datasets.zipf_corpus``): 10,000 documents over 100,000 words, Zipf
background words with the 20 most frequent removed as stop words, and five planted topics
of five words; a document belongs to one topic. A UCI bag-of-words file (e.g. the paper's
NYTimes ``docword.nytimes.txt``) is used instead when the environment variable
``BAYESKIT_BOW_PATH`` names one (then no topics are known and only the words are printed).

Printed per component: its words, the planted topic they come from, the penalty found for
cardinality 5, the features that survive elimination (out of 100,000) and the variance the
component explains; and the total seconds (the paper reports about 20 s for its penalty
search on NYTimes). Quick: 2,000 documents over 20,000 words.
"""

from __future__ import annotations

import os
import time

import numpy as np

from bayeskit.datasets import read_uci_bag_of_words, zipf_corpus
from bayeskit.estimators import SparsePCA
from bayeskit.experiments.common import print_note, print_table, write_json

NAME = "sparse_pca_text"
CARDINALITY = 5
N_COMPONENTS = 5


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    path = os.environ.get("BAYESKIT_BOW_PATH")
    if path:
        X, topics, source = read_uci_bag_of_words(path), None, path
    else:
        n_documents, n_words = (2_000, 20_000) if quick else (10_000, 100_000)
        X, topics = zipf_corpus(n_documents, n_words, topic_size=CARDINALITY, seed=seed)
        source = f"zipf_corpus({n_documents}, {n_words}, topic_size={CARDINALITY}, seed={seed})"
    t = time.perf_counter()
    est = SparsePCA(n_components=N_COMPONENTS, cardinality=CARDINALITY, max_features=256).fit(X)
    seconds = time.perf_counter() - t
    rows, components = [], []
    for j, c in enumerate(est.components_):
        words = np.nonzero(c)[0].tolist()
        topic = None if topics is None else [int(np.sum(np.isin(words, tw))) for tw in topics]
        components.append({"words": words, "loadings": c[words].tolist(), "alpha": float(est.alphas_[j]),
                           "features_kept": int(est.n_features_kept_[j]),
                           "explained_variance": float(est.explained_variance_[j]), "words_per_topic": topic})
        found = "-" if topic is None else f"topic {int(np.argmax(topic))} ({max(topic)}/{len(words)} words)"
        rows.append([j + 1, " ".join(map(str, words)), found, f"{est.alphas_[j]:.4g}", est.n_features_kept_[j],
                     f"{est.explained_variance_[j]:.4g}"])
    print_table(f"\nSparse PCA of {source}: {X.shape[0]} documents x {X.shape[1]} words, {X.nnz} non-zeros; "
                f"{N_COMPONENTS} components of cardinality {CARDINALITY} in {seconds:.1f} s",
                ["PC", "words", "planted topic", "lambda", "features kept", "variance"], rows,
                paper="topics of the NYTimes corpus (not bundled) and about 20 s for its penalty search; no numbers for these data")
    recovered = None if topics is None else len({int(np.argmax(c["words_per_topic"])) for c in components
                                                 if max(c["words_per_topic"]) == len(c["words"])})
    if recovered is not None:
        print_note(f"planted topics recovered exactly (all of a component's words from one topic): {recovered} of {len(topics)}")
    payload = {"experiment": NAME, "quick": quick, "seed": seed, "source": source, "shape": list(X.shape),
               "nnz": int(X.nnz), "seconds": seconds, "components": components,
               "topics": None if topics is None else topics.tolist(), "topics_recovered": recovered}
    write_json(out_dir, NAME, payload)
    return payload


__all__ = ["run"]

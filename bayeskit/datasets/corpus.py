"""A synthetic document-term matrix for large-scale sparse PCA (no large public
bag-of-words corpus is available offline): Zipf-distributed background words with planted
topics, as a scipy.sparse CSR count matrix; and a reader for the UCI bag-of-words format
(``docword.*.txt``) when the user has such a file.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse

from bayeskit.core.validation import check_int_in, check_positive


def zipf_corpus(n_documents: int = 10_000, n_words: int = 100_000, *, n_topics: int = 5, topic_size: int = 10,
                background_length: int = 60, topic_rate: float = 4.0, exponent: float = 1.0,
                n_stop_words: int = 20, seed: int = 0):
    """Counts (n_documents, n_words) CSR and the planted topics (n_topics, topic_size) word
    ids. Each document draws ``background_length`` words from a Zipf law with ``exponent``
    over the vocabulary, belongs to one topic (uniformly) and adds Poisson(``topic_rate``)
    occurrences of each of that topic's words. The ``n_stop_words`` most frequent words are
    stop words and get no counts (text preprocessing removes them, as in the paper's
    corpora). Word ids are the law's 0-based frequency ranks; topic words are drawn among
    the ``20 n_topics topic_size`` ids that follow the stop words, ``n_stop_words`` to
    ``n_stop_words + 20 n_topics topic_size - 1`` (or to ``n_words - 1``), so that they are
    also frequent background words; ``n_words`` must leave room for the stop words and
    every topic's words."""
    n_documents, n_words = check_int_in("n_documents", n_documents, 1), check_int_in("n_words", n_words, 1)
    n_topics, topic_size = check_int_in("n_topics", n_topics, 1), check_int_in("topic_size", topic_size, 1)
    background_length, n_stop_words = check_int_in("background_length", background_length, 0), check_int_in("n_stop_words", n_stop_words, 0)
    if n_words < n_stop_words + n_topics * topic_size + 1:
        raise ValueError(f"n_words = {n_words} leaves no room for {n_stop_words} stop words, {n_topics} x {topic_size} topic words "
                         f"and a background word: it must be at least {n_stop_words + n_topics * topic_size + 1}.")
    check_positive(topic_rate=topic_rate)
    if not (np.isfinite(exponent) and exponent >= 0):
        raise ValueError(f"exponent must be a finite number >= 0 (0: every word equally likely), got {exponent!r}.")
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_words + 1) ** exponent
    weights[:n_stop_words] = 0.0
    weights /= weights.sum()
    pool = np.arange(n_stop_words, min(n_words, n_stop_words + 20 * n_topics * topic_size))
    topics = rng.choice(pool, (n_topics, topic_size), replace=False)
    rows = np.repeat(np.arange(n_documents), background_length)
    cols = rng.choice(n_words, n_documents * background_length, p=weights)
    membership = rng.integers(0, n_topics, n_documents)
    topic_counts = rng.poisson(topic_rate, (n_documents, topic_size))
    rows = np.r_[rows, np.repeat(np.arange(n_documents), topic_size)]
    cols = np.r_[cols, topics[membership].ravel()]
    counts = np.r_[np.ones(n_documents * background_length), topic_counts.ravel()]
    X = scipy.sparse.csr_matrix((counts, (rows, cols)), shape=(n_documents, n_words))
    X.sum_duplicates()
    X.eliminate_zeros()
    return X, topics


def read_uci_bag_of_words(path) -> scipy.sparse.csr_matrix:
    """A UCI bag-of-words file (three header lines D, W, NNZ, then NNZ lines "docID wordID
    count", 1-based) as a (D, W) CSR count matrix; a ``ValueError`` if the file holds
    another number of entry lines than NNZ."""
    with open(path) as f, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "loadtxt: input contained no data", UserWarning)
        D, W, nnz = (int(f.readline()) for _ in range(3))
        triples = np.loadtxt(f, dtype=np.int64, ndmin=2, usecols=(0, 1, 2))
    if len(triples) != nnz:
        raise ValueError(f"{path} states {nnz} entries (its third line) but holds {len(triples)} entry lines.")
    return scipy.sparse.csr_matrix((triples[:, 2].astype(float), (triples[:, 0] - 1, triples[:, 1] - 1)), shape=(D, W))

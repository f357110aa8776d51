"""Estimators called from several threads at once finish, and give what the same calls give
one after the other (JAX's CPU runtime can deadlock when two threads run fit loops at once;
see :class:`bayeskit.estimators._common.OneCallAtATime`)."""

import threading

import numpy as np
import pytest

from bayeskit.estimators import BSMLClassifier, MinCovDet


def _in_threads(jobs, timeout=120):
    """Run the callables ``jobs`` in daemon threads started together; their results in order."""
    results = [None] * len(jobs)
    start = threading.Barrier(len(jobs))

    def run(i):
        start.wait()
        try:
            results[i] = jobs[i]()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            results[i] = error

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a call from a thread never returned"
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def test_fits_in_two_threads_finish_and_match_sequential_fits(rng, emotions):
    X, Y, _, _ = emotions
    Z = rng.normal(size=(80, 3))

    def bsml(seed):
        for s in range(seed, seed + 2):  # the deadlock needs the two threads' fit loops to overlap
            est = BSMLClassifier(n_components=3, max_iter=50, random_state=s).fit(X, Y)
        return est.predict_proba(X), est.score(X, Y)

    def mcd(seed):
        return MinCovDet(random_state=seed).fit(Z).covariance_

    jobs = [lambda: (bsml(0), mcd(0)), lambda: (bsml(10), mcd(1))]
    threaded = _in_threads(jobs)
    for got, job in zip(threaded, jobs):
        (proba, score), cov = got
        (proba_seq, score_seq), cov_seq = job()
        np.testing.assert_array_equal(proba, proba_seq)
        assert score == score_seq
        np.testing.assert_array_equal(cov, cov_seq)


def test_a_subclass_defined_by_the_user_still_pickles_by_value(rng):
    """joblib's process backend sends a class defined in a notebook by value (cloudpickle);
    the lock the methods take must not travel with it."""
    cloudpickle = pytest.importorskip("cloudpickle")

    class Mine(MinCovDet):
        def fit(self, X, y=None):
            return super().fit(X, y)

    Z = rng.normal(size=(40, 2))
    copy = cloudpickle.loads(cloudpickle.dumps(Mine(random_state=0)))
    np.testing.assert_array_equal(copy.fit(Z).covariance_, MinCovDet(random_state=0).fit(Z).covariance_)

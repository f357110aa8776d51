"""The sinc experiment's account of where BLS is behind the RVM."""

from bayeskit.experiments.sparse_bayes_sinc import bls_behind


def _summary(rmse, nov, sigma):
    return {"rmse_mean": rmse, "nov_mean": nov, "sigma_mean": sigma}


def test_bls_behind_names_each_level_where_bls_loses_and_the_reason_the_numbers_show():
    results = {"0.1 RVM": _summary(0.040, 6.0, 0.100), "0.1 BLS": _summary(0.039, 6.1, 0.101),
               "0.5 RVM": _summary(0.137, 4.2, 0.489), "0.5 BLS": _summary(0.174, 2.8, 0.518),
               "0.7 RVM": _summary(0.185, 3.6, 0.697), "0.7 BLS": _summary(0.207, 3.9, 0.690)}
    lines = bls_behind(results)
    assert len(lines) == 2
    assert "sd 0.5" in lines[0] and "0.1740 against 0.1370" in lines[0]
    assert "prunes bases" in lines[0] and "noise estimate" in lines[0]
    assert "sd 0.7" in lines[1] and "neither its sparsity nor its noise estimate" in lines[1]

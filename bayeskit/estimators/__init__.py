"""scikit-learn style wrappers over the functional core.

``__init__`` stores hyperparameters only; ``fit`` validates on the host, runs the
jitted core (restarts as one ``vmap``), and sets trailing-underscore attributes.
One module per family: multilabel classifiers, conditional density regression,
relational link prediction, sparse Bayesian regression, covariance and components,
robust location, scatter and components.
"""

from bayeskit.estimators.covariance import EMRCA, RCA, GraphicalLasso, SparsePCA
from bayeskit.estimators.density import SBMoERegressor
from bayeskit.estimators.multilabel import BSMLClassifier, ProbitClassifier
from bayeskit.estimators.relational import IRMLinkPredictor, LFRMLinkPredictor, MMSBLinkPredictor
from bayeskit.estimators.robust import ROBPCA, MinCovDet
from bayeskit.estimators.sparse import BayesianLassoRegressor, BLSRegressor, FLAPRegressor, RVMRegressor

__all__ = ["BayesianLassoRegressor", "BLSRegressor", "BSMLClassifier", "EMRCA", "FLAPRegressor", "GraphicalLasso",
           "IRMLinkPredictor", "LFRMLinkPredictor", "MinCovDet", "MMSBLinkPredictor", "ProbitClassifier", "RCA", "ROBPCA",
           "RVMRegressor", "SBMoERegressor", "SparsePCA"]

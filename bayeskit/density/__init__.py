"""Conditional density regression: SBMoE (Zhang, Bokrantz & Olsson) and its baselines, the
conditioned DP mixture and the ARD Gaussian process, with their predictive mixtures."""

"""Robust location, scatter and components: FAST-MCD, ROBPCA and the ROBPCA paper's comparison methods."""

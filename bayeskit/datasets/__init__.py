"""Bundled data sets of the source papers and generators of their synthetic data."""

from .mulan import MULAN_NAMES, load_mulan, mulan_info

__all__ = ["MULAN_NAMES", "load_mulan", "mulan_info"]

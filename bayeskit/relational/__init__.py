"""Relational and latent feature models: the relational data, IRM, MMSB, the Indian buffet process and LFRM."""

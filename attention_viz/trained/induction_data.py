"""What the induction model reads: its symbols, its shape, and the segment lengths it was trained on
(every segment whose two copies fit after ``<bos>``). Shared by its training (induction.py) and by the
backend that runs it, which must not import the training and evaluation code."""

from __future__ import annotations

NAME = "induction"
SYMBOLS = tuple("abcdefghijklmnopqrstuvwxyz0123456789")
CONFIG = dict(shape="decoder-only", d_model=64, h=4, d_ff=1, N=2, max_len=64, positional="learned", norm="pre",
              dropout=0.0, scale_embeddings=False, feed_forward=False)
# Every segment whose two copies fit after <bos>: a learned position the data never reach stays
# random, and the heads that lean on it fail there (the model of 6–20 symbols did past 20).
MIN_SEGMENT, MAX_SEGMENT = 6, (CONFIG["max_len"] - 1) // 2

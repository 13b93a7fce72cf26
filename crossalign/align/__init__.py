"""Word alignment from the hidden states of a multilingual encoder.

XLM-Align's optimal-transport aligner (Chi et al., ACL 2021, §3.1) and SimAlign's ArgMax and
IterMax (Jalili Sabet et al., 2020), batched over sentence pairs with padding masks:
``similarity`` (scores between subword states), ``sinkhorn`` (entropic OT), ``extract``
(links from a score matrix), ``words`` (subwords <-> words), ``aligner`` (model + tokenizer).
"""

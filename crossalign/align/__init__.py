"""Word alignment from the hidden states of a multilingual encoder.

XLM-Align's optimal-transport aligner (Chi et al., ACL 2021, §3.1), SimAlign's ArgMax and
IterMax (Jalili Sabet et al., 2020) and awesome-align's softmax extraction (Dou & Neubig,
EACL 2021), batched over sentence pairs with padding masks: ``similarity`` (scores between
subword states), ``sinkhorn`` (entropic OT), ``extract`` (links and link scores from the
states), ``words`` (subwords <-> words, link and pair scores), ``aligner`` (model +
tokenizer, streamed a chunk at a time), ``api`` (``crossalign.Aligner``), ``files``
(``crossalign align`` and ``crossalign symmetrize`` on files), ``symmetrize``
(grow-diag-final-and, intersection, union).
"""

"""Lexicon tools: language-specific vocabularies (``vocab``), CSLS (``csls``), dictionary
induction from a model's embedding layer or hidden states (``embed``, ``induce``) — Lu et al.
2023, "Improve Multilingual Pre-Training Using Monolingual Corpora Only".

Submodules are imported where used, so the CLI parser does not pay for torch.
"""

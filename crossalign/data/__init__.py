"""Everything between raw sources and training batches, one subpackage a stage.

``corpora/`` builds plain-text corpora and dictionaries (with a data card) from their sources;
``derive/`` writes derived languages, systematic transformations of English; ``store/`` turns
configured sources into the tokenized, memory-mapped store every run reads. The modules at
this level are the low-level pieces those stages and the objectives share: the line rules of a
user's text files (``lines``, ``readers``, ``inputs``), the tokenizer (``tokenizer``,
``specials``), the input transforms an objective's collator applies (``masking``, ``noise``,
``pair_layout``), and the options of the data commands (``options``).
"""

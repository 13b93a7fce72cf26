"""The tokenized store: configured text sources (files, line-aligned pairs, dataset columns)
tokenized once into memory-mapped, sharded arrays that every run, resume and process reads
(``token_store``); the step from a run's ``data`` settings to that store and to the packed
blocks and sentence pairs training samples from (``prepare``); and monolingual text streamed
from a dataset when it is larger than the disk (``streaming``).
"""

"""Corpus builders: plain-text corpora and bilingual dictionaries from their sources (the Debian
packages of the Bible, the LibreOffice help pages and FreeDict, the POS samples), each written
atomically as ``OUT/<src>-<tgt>/{train,valid,test}.*`` with a ``card.json`` that records where
every line came from (``card``), and the lookup of a built corpus's files by language and split
(``files``). A builder is a short declarative call; nothing here tokenizes.
"""

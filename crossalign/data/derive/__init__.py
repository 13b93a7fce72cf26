"""Derived languages: English changed in one controlled way (word order inverted, syntax
reordered, tokens transliterated into a twin vocabulary), written as a regular parallel corpus
with the dictionaries that link the two sides (``derivation``), and the settings that name a
derived corpus on the command line, in study files and on its card (``settings``).
"""

"""Splitting a commentary entry into the paragraphs ``crossalign data commentary`` writes."""

from __future__ import annotations

from types import SimpleNamespace

from crossalign.data.corpora.commentary import index_entries, paragraphs


def test_an_entry_splits_at_runs_of_spaces_and_drops_headings_and_short_lines():
    entry = (
        "   TITLE. A Psalm of David, when he fled from Absalom his son.    Verses 1, 2, 3, 4.   "
        "Verse 1. LORD, how are they   increased that trouble me!\u00b6 Many are they.     Amen.  "
        "  Sela. It is a musical note, a pause in the song, [a rest].    "
        "Abram returns out of Egypt with great riches.(1-4)    "
        "Religion begun in hypocrisy ends in apostasy. William Spurstowe (1666)"
    )
    assert paragraphs(entry) == [
        "TITLE. A Psalm of David, when he fled from Absalom his son.",
        "Verse 1. LORD, how are they",
        "increased that trouble me! Many are they.",
        "Sela. It is a musical note, a pause in the song, a rest.",
        "Religion begun in hypocrisy ends in apostasy. William Spurstowe (1666)",
    ]
    assert paragraphs(entry, min_words=9) == [
        "TITLE. A Psalm of David, when he fled from Absalom his son.",
        "Sela. It is a musical note, a pause in the song, a rest.",
        "Religion begun in hypocrisy ends in apostasy. William Spurstowe (1666)",
    ]


def test_a_testament_index_has_headings_then_verses():
    # SWORD's verse-key index: module and testament headings, a heading per book and per
    # chapter, one entry per verse; KJV's Old Testament has 24,115 (TDavid's 289,380-byte
    # index / 12 bytes, MHCC's 241,150 / 10)
    books = [SimpleNamespace(num_chapters=2, chapter_lengths=[3, 4]),
             SimpleNamespace(num_chapters=1, chapter_lengths=[5])]  # fmt: skip
    assert index_entries(books) == 2 + 2 + 3 + 12

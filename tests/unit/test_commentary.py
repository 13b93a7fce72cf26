"""Splitting a commentary entry into the paragraphs ``crossalign data commentary`` writes."""

from __future__ import annotations

from crossalign.data.corpora.commentary import paragraphs


def test_an_entry_splits_at_runs_of_spaces_and_drops_headings_and_short_lines():
    entry = (
        "   TITLE. A Psalm of David, when he fled from Absalom his son.    Verses 1, 2, 3, 4.   "
        "Verse 1. LORD, how are they   increased that trouble me!\u00b6 Many are they.     Amen.  "
        "  Sela. It is a musical note, a pause in the song, [a rest]."
    )
    assert paragraphs(entry) == [
        "TITLE. A Psalm of David, when he fled from Absalom his son.",
        "Verse 1. LORD, how are they",
        "increased that trouble me! Many are they.",
        "Sela. It is a musical note, a pause in the song, a rest.",
    ]
    assert paragraphs(entry, min_words=8) == [
        "TITLE. A Psalm of David, when he fled from Absalom his son.",
        "Sela. It is a musical note, a pause in the song, a rest.",
    ]

"""The one exception type users see: a one-line message naming the file, line or key and the fix."""


class CrossalignError(Exception):
    """Bad input or state the user can fix. The CLI prints ``crossalign: error: <message>``."""

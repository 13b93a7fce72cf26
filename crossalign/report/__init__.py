"""``crossalign report``: the result records and training logs of a set of runs as one
Markdown page, one self-contained HTML page and their numbers as JSON."""

from crossalign.report.write import ReportPaths, write_report

__all__ = ["ReportPaths", "write_report"]

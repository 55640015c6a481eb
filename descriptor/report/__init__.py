"""The experiment report: one offline HTML page answering "does collaboration pay here?", every run a click away.

``write_report(root)`` writes ``<root>/report/index.html`` (layout: :mod:`descriptor.report.render`).
"""

from descriptor.exports import lazy_exports

_EXPORTS = {"write_report": "descriptor.report.build"}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)

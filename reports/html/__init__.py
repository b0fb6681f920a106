"""The HTML pages: the report, the diagnosis pages, their plotly figures."""

"""Outputs: the JSON report, text and live views, and the export formats."""

"""What front ends show: lines for a terminal or a CI log, tables, and documents for
``--json``, rendered from results (`_render`). The CLI prints them; a web view can too.
"""

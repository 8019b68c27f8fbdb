"""The report's pages: blocks, tables, the per-strategy table and the HTML/Markdown renderer."""

"""Putting results into pages: the page syntax, Markdown rendering, origins and each page's notebook."""

"""MkDocs: the plugin's event wiring and options, the background build under ``serve``, and the fixes and
additions to the built site (search, notebook HTML, MathJax, the web font)."""

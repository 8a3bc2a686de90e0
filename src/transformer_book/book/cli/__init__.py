"""The ways in besides MkDocs: ``python -m transformer_book`` and what a page's notebook calls in Jupyter."""

"""``python -m transformer_book …``: the book engine's command line (:mod:`transformer_book.book.cli.main`)."""

from transformer_book.book.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())

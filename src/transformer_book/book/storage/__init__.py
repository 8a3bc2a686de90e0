"""Keeping results: the content-addressed cache entries and blobs (``cache``) and where they live (``store``)."""

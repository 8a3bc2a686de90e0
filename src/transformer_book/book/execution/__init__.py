"""Running snippets: one snippet in a fresh process (``worker``), the local forkserver pool, a fresh
interpreter, a Dask cluster, and the lifetime of every snippet process."""

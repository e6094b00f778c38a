"""Views of results: the terminal, the end-of-run summary, and (later) the papers' tables."""

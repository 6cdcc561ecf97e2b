"""One module per view; each exposes ``render(result, request)``."""

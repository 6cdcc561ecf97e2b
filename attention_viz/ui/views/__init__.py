"""One module per view; each exposes ``render(result) -> dict`` (the choices to put in the URL)."""

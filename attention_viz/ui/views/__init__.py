"""One module per view; each exposes ``render(result)``: it reads the user's choices (which the
widgets put in the URL), calls one plain function per figure or table, and draws."""

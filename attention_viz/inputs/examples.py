"""The example sentences the sidebar offers a model that reads English (each backend may offer its
own: :meth:`attention_viz.backends.base.Backend.examples`). Plain data, no torch."""

from __future__ import annotations

TIRED = "The animal didn't cross the street because it was too tired."
WIDE = "The animal didn't cross the street because it was too wide."

ENGLISH = {
    "Coreference — tired (it → animal)": TIRED,
    "Coreference — wide (it → street)": WIDE,
    "Thinking Machines (the Illustrated Transformer's example)": "Thinking Machines",
    "我喜欢吃苹果 (“I like eating apples”)": "我喜欢吃苹果",
    "A longer sentence": (
        "The European Economic Area agreement was signed in Porto on 2 May 1992 and entered into force "
        "on 1 January 1994, after the people of Switzerland had voted against it."
    ),
}

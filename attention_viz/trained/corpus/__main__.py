"""``python -m attention_viz.trained.corpus``: show a few aligned pairs."""

from .sampling import generate

for example in generate(5, seed=0):
    print(" ".join(example.source))
    print(" ".join(example.target))
    links = zip(example.target, example.alignment)
    print("  " + "  ".join(f"{word}<-{example.source[i]}" for word, i in links))

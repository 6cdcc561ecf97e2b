"""Demo material: a synthetic translation corpus and the small models trained on it."""

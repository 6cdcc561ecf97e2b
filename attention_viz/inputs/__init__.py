"""What a user hands in: text as tokens (display labels, offsets, word grouping over `tokenizers`
encodings), images, and text files."""

"""The Transformer and its math: attention as pure functions, masks, positions (sinusoidal, learned,
rotary), hook names, hook points and the one intervention mechanism, our Transformer, long inputs
without a T × T array, and the plain-numpy results a run leaves. Nothing here imports torch at
package import: ``names`` and ``result`` load without it."""

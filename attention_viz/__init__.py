"""attention-viz: capture and show what every attention head of a Transformer does with a sentence."""

import os

# Offline unless the user opts in: without this, transformers asks the hub about every id and an
# unreachable hub costs ~48 s of DNS waiting before the error.
ALLOW_DOWNLOAD = os.environ.get("ATTENTION_VIZ_ALLOW_DOWNLOAD") == "1"
if not ALLOW_DOWNLOAD:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"

# Set before torch loads. Busy-waiting OpenMP threads starve the Python thread on a small shared
# machine (a server's first run: 0.55 s → 0.02 s), and 2 MB pages cut the page faults of the
# 75 MB of patterns a 512-token run writes (capture 1.37× → 1.22× the SDPA floor); see benchmarks/.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

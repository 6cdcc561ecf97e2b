"""attention-viz: capture and show what every attention head of a Transformer does with a sentence."""

import os

# Offline unless the user opts in: without this, transformers asks the hub about every id and an
# unreachable hub costs ~48 s of DNS waiting before the error.
ALLOW_DOWNLOAD = os.environ.get("ATTENTION_VIZ_ALLOW_DOWNLOAD") == "1"
if not ALLOW_DOWNLOAD:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"

import os
import sys
import tempfile
from pathlib import Path

from attention_viz.settings import apply_process_settings

# The test process is a process start like the CLI's and the server's: offline, and OpenMP threads
# that wait passively (busy-waiting ones starve everything else on a small shared machine).
apply_process_settings()

# atlases the app builds go to a folder of this run (the served app inherits it), never ~/.cache
os.environ["ATTENTION_VIZ_ATLAS_ROOT"] = tempfile.mkdtemp(prefix="attention-viz-atlas-")

# test helpers (browser.py) import as plain modules
sys.path.insert(0, str(Path(__file__).resolve().parent))

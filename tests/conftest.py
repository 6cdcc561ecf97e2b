import sys
from pathlib import Path

# test helpers (browser.py) import as plain modules
sys.path.insert(0, str(Path(__file__).resolve().parent))

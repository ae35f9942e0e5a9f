import sys
from pathlib import Path

# tests import their helpers (tshark_util, synth) as top-level modules
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sys
from pathlib import Path

# tests import their helpers (tshark_util, synth) as top-level modules
sys.path.append(str(Path(__file__).resolve().parent))

"""Evaluation tests: ``_paced_verifier`` importable (also by ``grpo serve`` in a child)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # _paced_verifier, also for `grpo serve _paced_verifier:SERVICE`

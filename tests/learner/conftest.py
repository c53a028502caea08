"""Learner-test setup: one torch thread per process (2 shared cores, see DESIGN.md)."""

from __future__ import annotations

import torch

torch.set_num_threads(1)

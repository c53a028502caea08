"""Learner: group-relative advantages, process credit, clipped losses, KL, diagnostics, trainer.

Pure torch with no I/O in the math modules; see DESIGN.md "Learner math".
"""

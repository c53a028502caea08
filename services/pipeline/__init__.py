"""`grpo run` on one machine: run config, local cluster, run driver, held-out evaluation."""

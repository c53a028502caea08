"""`grpo run` on one machine: run config, local cluster of services, run driver, held-out evaluation."""

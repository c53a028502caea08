"""Weight transfer without a shared volume: the learner serves every published policy version
as chunked, checksummed files (``grpo.v1.Weights``) and each generation replica pulls, verifies
and loads the versions it sees announced in Redis."""

"""Hand-written test data of the verifier tests (also read by ``python -m bench``)."""

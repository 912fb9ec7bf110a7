"""Demonstrations of the cryptographic core, run by ``securetrees demo NAME``."""

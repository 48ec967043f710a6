"""nat-verify: proofs and counterexamples for Kubernetes Service networking on a node."""

__version__ = "0.1.0"

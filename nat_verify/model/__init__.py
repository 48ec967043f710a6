"""Frozen values passed between nat-verify's pure functions."""

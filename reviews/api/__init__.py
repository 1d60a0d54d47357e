"""Proposals and dream runs for tooling (read), and triggering a dream run."""

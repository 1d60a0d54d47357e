"""The memory part of the agents' API: sessions, stores and entries, context, feedback (one module each)."""

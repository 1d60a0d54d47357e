"""The memory browser: stores, entries with their version history, and the session viewer."""

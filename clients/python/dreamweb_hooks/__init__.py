"""Hooks that connect Claude Code and Codex to Dreamweb with no code."""

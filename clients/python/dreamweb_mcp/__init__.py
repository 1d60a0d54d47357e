"""Dreamweb as an MCP server (``dreamweb-mcp``)."""

"""The review pages, one module per resource: the queue, decisions, dream runs, autonomy policies."""

"""Skills for agents, by progressive disclosure: the index (name, description, version), then one skill's body."""

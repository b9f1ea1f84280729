"""Graph nodes: each reads the state and returns a partial update; none of them routes."""

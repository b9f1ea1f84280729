"""The rule gates, one module each. Their order is `gates.pipeline.RULE_GATES`."""

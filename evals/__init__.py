"""`tracegate eval`: incident scenarios run through the same graph and guards as a Slack
turn, against the simulators, and scored against each scenario's truth."""

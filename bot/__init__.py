"""Floor 3: configuration, the command line and (later) the Slack app. Wires the floors below."""

"""Floor 3: settings, the Slack app, turns and workers, the command line. Wires the floors below."""

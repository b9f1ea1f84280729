"""A Slack event comes in: the Bolt app, its HTTP endpoint and the listeners, which hand each
payload to the services (`bot.process.services`)."""

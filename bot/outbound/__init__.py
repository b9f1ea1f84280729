"""What goes out to Slack: answers and progress, approval cards, feedback, the Home tab,
`/rubric` replies, all rendered as escaped Block Kit and posted exactly once."""

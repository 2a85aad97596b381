"""Notification sinks: webhooks that take JSON, or Slack-compatible incoming webhooks."""

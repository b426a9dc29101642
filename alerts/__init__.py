"""Alerts: rules per tenant, evaluated from the daily roll-ups and the write paths, delivered
to signed webhooks, Slack-compatible webhooks and e-mail by Celery."""

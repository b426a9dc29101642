"""Kindgi Console: the dashboard and authoring console for agent guardrails."""

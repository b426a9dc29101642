"""Kindgi Console: the dashboard and authoring console for agent guardrails."""

from kindgi_console.celery import app as celery_app

__all__ = ("celery_app",)

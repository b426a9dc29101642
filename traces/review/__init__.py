"""What reviewers do and read: the trace and violation pages, the review of a violation
(`workflow`), the keyboard queue, a guardrail's quality (`quality`) and an llm-judge's
calibration against people (`calibration`), and the guardrail list and detail pages.
"""

"""The store every context writes and reads: traces' results and violations written in bulk
(`bulk`, with a PostgreSQL and a SQLite writer), the daily roll-ups of violations
(`violation_days`), the filters of the lists (`filters`), leases and workers' heartbeats
(`leases`, `heartbeat`), retention, the write paths' signals, and what pages share (`pages`,
`timeline`). It imports no other context of traces but the judge.
"""

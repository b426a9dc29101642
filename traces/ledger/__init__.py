"""The judge's console side: the judge models page, API and admin (`judge_views`, `judge_api`,
`judge_admin`) and the cost ledger's page, chart budget line and API. The calls and the
ledger's writes are `traces.judge`'s.
"""

"""Evaluation runs: a run over stored traces (`evaluations`: creating one; `chunks`: planning,
evaluating and recovering its chunks; `run_ends`: how it ends), its results and two runs
compared (`run_results`, `comparisons`), and a draft's previews (Try it, Preview impact:
`previews`, `try_api`). `api`, `views`, `urls` and `tasks` are its endpoints, pages, routes
and background work.
"""

"""The floor of the stack for `bench/evaluate_vs_bare.py`: a bare Django project whose one
view parses a JSON body and inserts one row into the console's PostgreSQL database."""

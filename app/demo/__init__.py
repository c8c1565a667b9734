"""Synthetic demo corpus: realistic A2A runs with seeded A²-Failures truth (pure computation).

See `app.demo.generator` for the API; `app.demo.audits` for the shipped machine judgments.
"""
from app.demo.generator import DemoRun, generate_corpus, generate_long_run, generate_run, generate_runs

__all__ = ["DemoRun", "generate_corpus", "generate_long_run", "generate_run", "generate_runs"]

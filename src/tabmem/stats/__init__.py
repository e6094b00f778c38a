"""Scoring, baselines, p-values, confidence intervals and verdicts."""

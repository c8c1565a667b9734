"""Failure-rate estimates: human-only, judge-only and prediction-powered (PPI++) rates with intervals."""

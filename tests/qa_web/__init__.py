"""Regression tests for problems found by browsing the app as each kind of user."""

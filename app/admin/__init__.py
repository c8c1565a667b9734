"""Admin pages: users and roles, assignments, progress, blind-mode toggle."""

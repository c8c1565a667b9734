"""LLM judges run here: judge files (schema), prompts, the answer contract (parse), strategies,
the async runner, calibration (scoring), services, REST (views) and pages. See docs/judges.md."""

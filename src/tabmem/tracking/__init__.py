"""MLflow tracking: one run per grid cell, with prompts and completions as tables."""

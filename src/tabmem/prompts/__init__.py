"""Prompt builders: zero-knowledge few-shot examples, chat and plain-completion forms."""

"""The contamination lab: plant datasets in a small model, measure how often tests find them."""

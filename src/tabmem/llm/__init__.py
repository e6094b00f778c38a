"""Language-model backends behind one interface, with a cache, concurrency and retries."""

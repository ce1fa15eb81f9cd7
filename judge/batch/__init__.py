"""Provider batch APIs (`batch=true`): submit, journal, resume and collect a run's batches."""

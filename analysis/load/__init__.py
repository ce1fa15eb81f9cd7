"""Loading what a study wrote: results, shards, checks, and synthetic studies for tests."""

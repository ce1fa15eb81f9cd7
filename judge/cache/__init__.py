"""The call cache: entries on disk or in Redis, and its export/import (`python -m judge.cache
export|import`)."""

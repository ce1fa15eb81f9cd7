"""NovBench's reference-based metrics, human validation and tables."""

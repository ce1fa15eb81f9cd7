"""The stages besides judging: generation, NovBench's extraction, EchoReview's issues, robustness
perturbations."""

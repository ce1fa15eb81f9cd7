"""What the judge, the experiments and the analysis all share: the results schema, CSV cells, confidence
intervals, user paths."""

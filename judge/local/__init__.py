"""Models that run in-process, offline: the embedded judge and the sentence embedders."""

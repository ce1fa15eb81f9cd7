"""Datasets: the instance format, its loader and validation, each public dataset's reader, and `python -m
experiments.data`."""

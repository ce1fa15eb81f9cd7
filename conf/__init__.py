"""Hydra config groups; importing the package registers the typed schemas the YAML files extend."""

from experiments.config import register

register()

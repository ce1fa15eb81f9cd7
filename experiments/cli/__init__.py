"""What every command-line entry point does around Hydra: secrets, one-line errors."""

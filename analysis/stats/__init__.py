"""The statistics every view reads: scores, win rates, agreement, reliability, latent truth."""

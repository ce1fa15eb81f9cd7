"""The statistics every view reads: scores, win rates, agreement, reliability, latent truth.

What each one is, assumes and cites: see docs/statistics.md.
"""

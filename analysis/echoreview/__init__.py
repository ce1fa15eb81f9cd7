"""EchoReview's Overall Quality, issue overlap and pairwise win rate."""

"""What calls cost: litellm's price map, a judge's prices, the run's budget and a sweep's ledger."""

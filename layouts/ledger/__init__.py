"""The Ledger page (owner): releases, totals, budgets and dataset losses."""

"""The release studio's services: runs charged through the ledger's door, model check,
downloads (DP CSV, report)."""

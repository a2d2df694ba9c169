"""The Anonymize page (owner): k-anonymity controls, report and figures."""

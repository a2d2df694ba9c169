"""Shared by every page: the app frame (shell), accessible form and chart helpers, the graph
config, the DP figure builders and the budget block."""

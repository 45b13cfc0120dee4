"""Helpers shared by the estimators (validation, parameter constraints)."""

"""Faust agents: replicate the action topic into the eventual store, keep the tables current."""

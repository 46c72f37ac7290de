"""Developer tools of the repository itself (not shipped): checks run by tests and `make` targets."""

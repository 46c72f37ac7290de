"""Test support shared by all test packages: real processes started and always cleaned up."""

"""The thesis's experiments (chapter 6, appendix A) reproduced on the real system, with plots and a
report: `make experiments` (`python -m experiments`). See `docs/results.md`."""

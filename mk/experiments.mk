# The thesis's experiments on the real system (experiments/; docs/results.md).

EXP      ?=
EXP_ARGS ?=

.PHONY: experiments

experiments: setup build ## the thesis's experiments on TARGET: CSVs, PNG plots and results/experiments/report.md (EXP=migration-bytes; EXP_ARGS="--quick --seed 2"; --list names them)
	$(PY) -m experiments --target $(TARGET) $(EXP_ARGS) $(EXP)

"""p4c's STF tests on p4sim: the format (`format`) and the in-process runner (`run`)."""

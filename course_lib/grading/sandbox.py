"""The limits a graded copy's process tree runs under."""

CELL_TIMEOUT, NOTEBOOK_TIMEOUT, MEMORY_GIB = 120, 600, 4.0
# Seconds a kernel may take to start, with the libraries its lesson imports, before
# the learner's first cell: a busy machine's business, not the learner's, so a separate and
# generous limit, and a kernel that did not start is started again once.
STARTUP_TIMEOUT = 300

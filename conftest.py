"""pytest set-up for the whole repository (tests/ and the nbval runs of notebooks/)."""

# nbval waits a fixed 5 s for each message a kernel sends after a cell finishes and fails with
# "Timeout of 5 seconds exceeded waiting for output" when none comes in time. On a busy machine a
# kernel that has finished can take longer than that to send its outputs, so wait longer. This
# is patience only: every output is still compared, and --nbval-cell-timeout still bounds a cell.
NBVAL_OUTPUT_TIMEOUT = 120  # seconds


def pytest_collection_modifyitems(items):
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:
        return
    for item in items:
        if isinstance(item, IPyNbCell):
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT

"""The ``squall`` subcommands, one module per group."""

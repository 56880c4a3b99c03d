"""runkit's pure core: nothing here does I/O beyond reading the clocks, and nothing imports runkit outside core."""

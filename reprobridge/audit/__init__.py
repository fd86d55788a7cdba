"""rb audit: run each experiment several times in isolation and record the evidence."""

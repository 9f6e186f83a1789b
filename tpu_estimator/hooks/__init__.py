"""Session hooks: loop control and the built-in run hooks (`run_control`), progress logs
(`progress`), SIGTERM (`preemption`), early stopping and in-memory evaluation, all triggering
through one periodic trigger (`periodic`)."""

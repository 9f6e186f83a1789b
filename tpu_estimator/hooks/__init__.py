"""Session hooks: loop control and the built-in run hooks (`run_control`), progress logs
(`progress`), SIGTERM during training (`preemption`), early stopping and in-memory evaluation,
and the one "every N steps or T seconds, loop-aware" trigger they share (`periodic`)."""

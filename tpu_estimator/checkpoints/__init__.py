"""The model_dir's checkpoints, one concern a module: which one is the latest and intact
(`state`), saving them (`saving`), restoring and reading them (`restoring`), snapshots that
rotation cannot pull away (`pinning`), the Scaffold's restore (`scaffolds`), the model_dir
lock (`lock`) and the process's one SIGTERM handler (`sigterm`: deferral during training,
snapshot cleanup)."""

"""The per-call engine: calling the user's `input_fn` and `model_fn`, building what one
`session.run` computes per mode (`steps`), keeping graphs for the next call (`graph_cache`),
host functions (`host_calls`) and writing SavedModels (`savedmodel`)."""

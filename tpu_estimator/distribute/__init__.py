"""Where a call runs and how its shards meet: the call's plan (`layout`), the replicas over
`tf.distribute` (`replication`, `gpus`), the host's input for them (`host_input`), device loops
(`device_loop`), XLA (`xla`), how shard outputs are gathered on the host (`gather`) and
summed across the replicas inside model_fn (`cross_replica`)."""

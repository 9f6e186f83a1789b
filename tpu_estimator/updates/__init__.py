"""What happens between the user's gradients and the variables: mixed precision (`precision`),
gradient accumulation (`accumulation`) and an optimizer's own update on several shards
(`shard_sum`), all reached through the one patch of the v1 `Optimizer` (`interceptor`, which
owns their order), element-wise updates on CPU (`cpu_updates`), and the base of the optimizers
that wrap the user's (`wrapping`)."""

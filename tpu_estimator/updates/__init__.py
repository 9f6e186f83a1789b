"""What happens between the user's gradients and the variables: mixed precision (`precision`)
and gradient accumulation (`accumulation`), both reached through the one patch of the v1
`Optimizer` (`interceptor`, which owns their order), element-wise updates on CPU
(`cpu_updates`), and the base of the optimizers that wrap the user's (`wrapping`)."""

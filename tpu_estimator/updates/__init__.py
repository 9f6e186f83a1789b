"""What happens between the user's gradients and the variables: mixed precision (`precision`)
and gradient accumulation (`accumulation`), both reached through the one patch of the v1
`Optimizer` (`interceptor`, which owns their order), and element-wise updates on CPU
(`cpu_updates`)."""

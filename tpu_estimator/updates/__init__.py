"""What happens between the user's gradients and the variables: gradient accumulation
(`accumulation`), mixed precision (`precision`), element-wise updates on CPU (`cpu_updates`)."""

"""The command-line applications on top of the library: the `tpu-estimator` command (`cli`), its
`demo`, `inspect` (`inspection`) and `launch` (`launcher`) subcommands.  Nothing in the library
core imports them; this package's `__init__` imports only the standard library, so `cli` can set
up the command before TensorFlow is imported."""

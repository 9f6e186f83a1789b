"""`python -m tpu_estimator ...`: the `tpu-estimator` command."""
import sys

from tpu_estimator.tools.cli import main

if __name__ == '__main__':
  sys.exit(main())

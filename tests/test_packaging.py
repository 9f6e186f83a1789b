"""The installed package's metadata: the version in one place, the license as SPDX."""
from importlib import metadata

import tpu_estimator


def test_installed_version_is_the_one_in_the_source():
  """pyproject reads the version from tpu_estimator.__version__: what pip installed says the
  same (a version written in two places drifts)."""
  assert metadata.version('tpu-estimator') == tpu_estimator.__version__


def test_license_is_an_spdx_expression_with_its_file():
  """setuptools 77+ warns on every build for a `license = {text = ...}` table; the SPDX
  expression and the license file are what PyPI and pip show."""
  meta = metadata.metadata('tpu-estimator')
  assert meta['License-Expression'] == 'Apache-2.0'
  assert 'LICENSE' in meta.get_all('License-File')
  assert 'Programming Language :: Python :: 3.11' in meta.get_all('Classifier')

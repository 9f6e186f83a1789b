"""Keras 3 layers inside a v1 graph, as Keras 2 behaved there: variable naming (`naming`) and
losses and random layers (`in_graph`), each acting only in graphs that `naming.names()` marks.
`install()` puts both in place once Keras is loaded."""
from tpu_estimator.keras3 import in_graph
from tpu_estimator.keras3 import naming


def install():
  """Installs the Keras 3 adaptations once (before Keras is loaded there is nothing to adapt,
  and a later call installs them)."""
  if naming.keras_loaded():
    naming.install()
    in_graph.install()

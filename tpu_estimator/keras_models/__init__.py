"""Compiled Keras models (tf_keras or Keras 3) as estimators: `model_to_estimator`.

`convert` (the entry points and their argument checks), `model_fn` (the model re-created in
each graph), `compiled` (its compiled loss and metrics), `optimizers` (its compiled optimizer
in a v1 graph), `io` (input_fn's features and labels as the model's inputs and targets),
`checkpoints` (object-based names, the Keras weights it warm-starts from), `backends` (which
Keras).
"""
from tpu_estimator.keras_models.convert import legacy_model_to_estimator
from tpu_estimator.keras_models.convert import model_to_estimator

__all__ = ['model_to_estimator', 'legacy_model_to_estimator']

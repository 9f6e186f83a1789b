"""`iterations_per_loop`: many training steps per `session.run`, on any device.

`train_loop` builds a graph while-loop (control flow v2, so variable names stay those of a
plain call) that reads the next per-replica inputs as optionals and runs one step per
iteration until it has run `iterations` steps (a tensor, fed per call so loops can be clipped to
land on the step target), the input ends, or the loss is no longer finite.
"""
import tensorflow as tf


def train_loop(next_inputs, run_step, iterations):
  """Returns (steps_run, loss, input_exhausted) tensors.

  `next_inputs()` → (has_value, values_fn); `run_step(values)` → the step's scalar loss, with
  the update as a control dependency.  `loss` is the last step's loss, or the first non-finite
  one (the loop stops there so NaN checks name the right step).
  """
  iterations = tf.cast(iterations, tf.int64)

  def cond(steps, loss, exhausted):
    return tf.logical_and(tf.logical_and(steps < iterations, tf.logical_not(exhausted)),
                          tf.math.is_finite(loss))

  def body(steps, loss, exhausted):
    del exhausted
    has_value, values_fn = next_inputs()

    def step():
      new_loss = tf.cast(run_step(values_fn()), tf.float32)
      return steps + 1, new_loss, tf.constant(False)

    def stop():
      return steps, loss, tf.constant(True)

    return tf.cond(has_value, step, stop)

  init = (tf.constant(0, tf.int64), tf.constant(0.0), tf.constant(False))
  return tf.while_loop(cond, body, init, parallel_iterations=1)

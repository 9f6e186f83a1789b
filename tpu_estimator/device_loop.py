"""`iterations_per_loop`: many training steps per `session.run`, on any device.

`train_loop` builds a graph while-loop (control flow v2, so variable names stay those of a
plain call) that reads the next per-replica inputs and runs one step per iteration until it has
run `iterations` steps (a tensor, fed per call so loops can be clipped to land on the step
target), the input ends, or the loss is no longer finite.  There is deliberately no `tf.cond`
in the body: a conditional step cannot place replicas' resources on several devices.
"""
import tensorflow as tf


def train_loop(next_inputs, run_step, iterations):
  """Returns (steps_run, loss) tensors.

  `next_inputs()` → the per-replica inputs of one step, read with `get_next()`: at the end of
  the input the loop's `session.run` fails with OutOfRangeError after the steps already run
  (their updates are kept and counted by the global step), which ends training cleanly.
  `run_step(values)` → the step's scalar loss, with the update as a control dependency.
  `loss` is the last step's loss, or the first non-finite one: the loop stops there, so NaN
  checks name the right step.
  """
  iterations = tf.cast(iterations, tf.int64)

  def cond(steps, loss):
    return tf.logical_and(steps < iterations, tf.math.is_finite(loss))

  def body(steps, loss):
    del loss
    return steps + 1, tf.cast(run_step(next_inputs()), tf.float32)

  init = (tf.constant(0, tf.int64), tf.constant(0.0))
  return tf.while_loop(cond, body, init, parallel_iterations=1)

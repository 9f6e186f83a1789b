"""`tf.contrib.stateless`: TF 1.x's stateless random ops, which are TensorFlow's own (the same
seed gives the same numbers)."""
import tensorflow as tf

__all__ = ['stateless_random_uniform', 'stateless_random_normal',
           'stateless_truncated_normal', 'stateless_multinomial']

stateless_random_uniform = tf.random.stateless_uniform
stateless_random_normal = tf.random.stateless_normal
stateless_truncated_normal = tf.random.stateless_truncated_normal
stateless_multinomial = tf.compat.v1.random.stateless_multinomial

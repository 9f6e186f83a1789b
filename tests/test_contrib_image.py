"""tf.contrib.image: projective transforms on small images, against the documented mapping
(output pixel (x, y) reads input ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k))."""
import math

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator.compat.contrib import image

IMG = np.arange(1, 13, dtype=np.float32).reshape(3, 4)  # [H=3, W=4]


def _eval(tensor):
  return tensor.numpy() if hasattr(tensor, 'numpy') else tensor


def test_translate_shifts_and_fills_with_zeros():
  out = _eval(image.translate(IMG, [1, 0]))  # dx=1: content moves right
  expected = np.zeros_like(IMG)
  expected[:, 1:] = IMG[:, :-1]
  np.testing.assert_array_equal(out, expected)
  out = _eval(image.translate(IMG[None, :, :, None], [[0, -1]]))[0, :, :, 0]
  expected = np.zeros_like(IMG)
  expected[:-1] = IMG[1:]
  np.testing.assert_array_equal(out, expected)


def test_transform_follows_the_documented_output_to_input_mapping():
  rng = np.random.RandomState(0)
  img = rng.rand(5, 6, 2).astype(np.float32)
  transform = [1.0, 0.0, 1.0, 0.0, 1.0, 2.0, 0.0, 0.0]  # reads input (x + 1, y + 2)
  out = _eval(image.transform(img, transform))
  for y in range(5):
    for x in range(6):
      src_x, src_y = x + 1, y + 2
      expected = img[src_y, src_x] if src_x < 6 and src_y < 5 else 0
      np.testing.assert_array_equal(out[y, x], expected)


def test_rotate_quarter_turn_counterclockwise_about_the_centre():
  img = np.arange(9, dtype=np.float32).reshape(3, 3)
  out = _eval(image.rotate(img, math.pi / 2))
  np.testing.assert_array_equal(out, np.rot90(img))  # numpy's rot90 is counterclockwise
  batch = np.stack([img, img])[..., None]
  out = _eval(image.rotate(batch, [0.0, math.pi]))[..., 0]
  np.testing.assert_array_equal(out[0], img)
  np.testing.assert_array_equal(out[1], img[::-1, ::-1])


def test_transform_helpers_and_bad_input():
  t = _eval(image.angles_to_projective_transforms(0.0, 3, 4))
  np.testing.assert_allclose(t, [[1, 0, 0, 0, 1, 0, 0, 0]], atol=1e-6)
  composed = _eval(image.compose_transforms([1, 0, 1, 0, 1, 0, 0, 0], [1, 0, 2, 0, 1, 3, 0, 0]))
  np.testing.assert_allclose(composed, [[1, 0, 3, 0, 1, 3, 0, 0]])
  with pytest.raises(ValueError, match='interpolation'):
    image.transform(IMG, [1, 0, 0, 0, 1, 0, 0, 0], interpolation='CUBIC')
  with pytest.raises(ValueError, match='rank'):
    image.rotate(np.zeros([2], np.float32), 0.0)


def test_in_graph_mode_with_bilinear_interpolation():
  with tf.Graph().as_default():
    out = image.translate(tf.constant(IMG), [0.5, 0.0], interpolation='BILINEAR')
    with tf.compat.v1.Session() as session:
      value = session.run(out)
  np.testing.assert_allclose(value[:, 1], (IMG[:, 0] + IMG[:, 1]) / 2)

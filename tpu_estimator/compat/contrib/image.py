"""`tf.contrib.image`: projective transforms of images (`transform`, `rotate`, `translate`)
on TensorFlow's `ImageProjectiveTransformV3` kernel, as TF 1.15 documented them.

A transform is 8 numbers [a0, a1, a2, b0, b1, b2, c0, c1] mapping each OUTPUT pixel (x, y)
to the INPUT point ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1;
points outside the input read 0.  Images are [height, width], [height, width, channels] or
[batch, height, width, channels]; transforms [8] (every image) or [batch, 8].
"""
import tensorflow as tf

from tpu_estimator import errors

__all__ = [
    'angles_to_projective_transforms', 'compose_transforms', 'flat_transforms_to_matrices',
    'matrices_to_flat_transforms', 'rotate', 'transform', 'translate',
    'translations_to_projective_transforms',
]


def _as_batch(images):
  """(4-D images, function giving the caller's rank back)."""
  images = tf.convert_to_tensor(images)
  rank = images.shape.rank
  if rank == 2:
    return images[None, :, :, None], lambda x: x[0, :, :, 0]
  if rank == 3:
    return images[None], lambda x: x[0]
  if rank == 4:
    return images, lambda x: x
  raise errors.value_error('Images must have rank 2, 3 or 4.',
                           'Pass [H, W], [H, W, C] or [N, H, W, C] images.', images=images)


def transform(images, transforms, interpolation='NEAREST', output_shape=None, name=None):
  """`images` transformed by `transforms` ([8] or [batch, 8]); `interpolation` 'NEAREST'
  or 'BILINEAR'; `output_shape` [height, width] (default: the input's)."""
  interpolation = str(interpolation).upper()
  if interpolation not in ('NEAREST', 'BILINEAR'):
    raise errors.value_error('Unknown `interpolation`.', "Pass 'NEAREST' or 'BILINEAR'.",
                             interpolation=interpolation)
  with tf.name_scope(name or 'transform'):
    batch, restore = _as_batch(images)
    transforms = tf.convert_to_tensor(transforms, tf.float32)
    if transforms.shape.rank == 1:
      transforms = transforms[None]
    elif transforms.shape.rank != 2:
      raise errors.value_error('`transforms` must have rank 1 or 2.',
                               'Pass [8] or [batch, 8].', transforms=transforms)
    if output_shape is None:
      output_shape = tf.shape(batch)[1:3]
    output_shape = tf.convert_to_tensor(output_shape, tf.int32)
    out = tf.raw_ops.ImageProjectiveTransformV3(
        images=batch, transforms=transforms, output_shape=output_shape,
        fill_value=tf.constant(0.0, tf.float32), interpolation=interpolation,
        fill_mode='CONSTANT')
    return restore(out)


def angles_to_projective_transforms(angles, image_height, image_width, name=None):
  """Transforms rotating images counterclockwise by `angles` (radians, scalar or [batch])
  about their centre."""
  with tf.name_scope(name or 'angles_to_projective_transforms'):
    angles = tf.convert_to_tensor(angles, tf.float32)
    if angles.shape.rank == 0:
      angles = angles[None]
    height = tf.cast(image_height, tf.float32) - 1.0
    width = tf.cast(image_width, tf.float32) - 1.0
    cos, sin = tf.cos(angles), tf.sin(angles)
    x_offset = (width - (cos * width - sin * height)) / 2.0
    y_offset = (height - (sin * width + cos * height)) / 2.0
    zeros = tf.zeros_like(angles)
    return tf.stack([cos, -sin, x_offset, sin, cos, y_offset, zeros, zeros], axis=1)


def rotate(images, angles, interpolation='NEAREST', name=None):
  """`images` rotated counterclockwise by `angles` radians (scalar or [batch])."""
  with tf.name_scope(name or 'rotate'):
    batch, restore = _as_batch(images)
    shape = tf.shape(batch)
    transforms = angles_to_projective_transforms(angles, shape[1], shape[2])
    return restore(transform(batch, transforms, interpolation))


def translations_to_projective_transforms(translations, name=None):
  """Transforms shifting images by `translations` [dx, dy] (or [batch, 2]) pixels."""
  with tf.name_scope(name or 'translations_to_projective_transforms'):
    translations = tf.convert_to_tensor(translations, tf.float32)
    if translations.shape.rank == 1:
      translations = translations[None]
    ones = tf.ones_like(translations[:, 0])
    zeros = tf.zeros_like(ones)
    return tf.stack([ones, zeros, -translations[:, 0], zeros, ones, -translations[:, 1],
                     zeros, zeros], axis=1)


def translate(images, translations, interpolation='NEAREST', name=None):
  """`images` shifted by `translations` [dx, dy] (or [batch, 2]) pixels."""
  with tf.name_scope(name or 'translate'):
    return transform(images, translations_to_projective_transforms(translations),
                     interpolation)


def flat_transforms_to_matrices(transforms):
  """[batch, 8] transforms -> [batch, 3, 3] matrices."""
  transforms = tf.reshape(tf.convert_to_tensor(transforms, tf.float32), [-1, 8])
  ones = tf.ones_like(transforms[:, :1])
  return tf.reshape(tf.concat([transforms, ones], axis=1), [-1, 3, 3])


def matrices_to_flat_transforms(transform_matrices):
  """[batch, 3, 3] matrices -> [batch, 8] transforms (normalised so the last entry is 1)."""
  matrices = tf.convert_to_tensor(transform_matrices, tf.float32)
  flat = tf.reshape(matrices, [-1, 9])
  return (flat / flat[:, 8:9])[:, :8]


def compose_transforms(*transforms):
  """One transform doing what `transforms` do applied right to left (the last first, as
  matrix products)."""
  if not transforms:
    raise errors.value_error('compose_transforms needs at least one transform.',
                             transforms=transforms)
  composed = flat_transforms_to_matrices(transforms[0])
  for t in transforms[1:]:
    composed = tf.matmul(composed, flat_transforms_to_matrices(t))
  return matrices_to_flat_transforms(composed)

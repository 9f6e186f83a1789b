"""What a model_fn returns: `ModeKeys`, `EstimatorSpec` and `TPUEstimatorSpec` validation.

Every error case checks the exception type and that the message names the argument and the
value received.  Tensors are built inside a fresh `tf.Graph` (the `graph` fixture), as
inside a model_fn.
"""
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.saved_model.model_utils import export_output

import tpu_estimator as te

v1 = tf.compat.v1
TRAIN, EVAL, PREDICT = te.ModeKeys.TRAIN, te.ModeKeys.EVAL, te.ModeKeys.PREDICT


def _match(*fragments):
  """A `match=` regex requiring every literal fragment somewhere in the message."""
  return '(?s)' + ''.join('(?=.*%s)' % re.escape(f) for f in fragments)


def _loss(value=1.0):
  return tf.constant(value)


def _other_graph_tensors():
  """A scalar, an op and a vector made in a graph that is not the default one."""
  with tf.Graph().as_default():
    return tf.constant(1.0), tf.no_op(), tf.constant([1.0, 2.0])


class _Hook(v1.train.SessionRunHook):
  pass


def _run(fetches):
  with v1.Session() as sess:
    sess.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
    return sess.run(fetches)


# --------------------------------------------------------------------------------------------
# ModeKeys


def test_mode_keys_values():
  assert te.ModeKeys.TRAIN == 'train'
  assert te.ModeKeys.EVAL == 'eval'
  assert te.ModeKeys.PREDICT == 'infer'


def test_unknown_mode_rejected(graph):
  with pytest.raises(ValueError, match=_match('mode', "'training'")):
    te.EstimatorSpec('training', loss=_loss())


# --------------------------------------------------------------------------------------------
# EstimatorSpec: required fields per mode


def test_train_spec_fields_and_defaults(graph):
  loss, train_op = _loss(2.0), tf.no_op()
  spec = te.EstimatorSpec(TRAIN, loss=loss, train_op=train_op)
  assert spec.mode == TRAIN
  assert spec.loss is loss
  assert spec.train_op is train_op
  assert spec.predictions == {}
  assert spec.eval_metric_ops == {}
  assert spec.export_outputs is None
  assert isinstance(spec.scaffold, v1.train.Scaffold)
  for hooks in (spec.training_chief_hooks, spec.training_hooks, spec.evaluation_hooks,
                spec.prediction_hooks):
    assert hooks == ()


@pytest.mark.parametrize('mode', [TRAIN, EVAL])
def test_missing_loss(graph, mode):
  kwargs = {'train_op': tf.no_op()} if mode == TRAIN else {}
  with pytest.raises(ValueError, match=_match('Missing loss', 'loss=None', repr(mode))):
    te.EstimatorSpec(mode, **kwargs)


def test_missing_train_op_in_train(graph):
  with pytest.raises(ValueError, match=_match('Missing train_op', 'train_op=None', "'train'")):
    te.EstimatorSpec(TRAIN, loss=_loss())


def test_eval_needs_no_train_op_and_predict_needs_no_loss(graph):
  assert te.EstimatorSpec(EVAL, loss=_loss()).train_op is None
  spec = te.EstimatorSpec(PREDICT, predictions=tf.constant([1.0]))
  assert spec.loss is None and spec.train_op is None


def test_missing_predictions_in_predict(graph):
  with pytest.raises(ValueError,
                     match=_match('Missing predictions', 'predictions=None', "'infer'")):
    te.EstimatorSpec(PREDICT)


# --------------------------------------------------------------------------------------------
# loss


@pytest.mark.parametrize('loss', [1.0, np.float32(1.0), [1.0]], ids=['float', 'numpy', 'list'])
def test_loss_not_a_tensor(graph, loss):
  with pytest.raises(TypeError, match=_match('`loss` must be a Tensor', 'loss=%r' % (loss,))):
    te.EstimatorSpec(EVAL, loss=loss)


def test_loss_of_shape_1_is_reshaped_to_scalar(graph):
  spec = te.EstimatorSpec(TRAIN, loss=tf.constant([3.5]), train_op=tf.no_op())
  assert spec.loss.shape == tf.TensorShape([])
  assert _run(spec.loss) == pytest.approx(3.5)


@pytest.mark.parametrize('shape', [[2, 3], [2]])
def test_loss_not_scalar_rejected(graph, shape):
  with pytest.raises(ValueError, match=_match('Loss must be scalar', str(tuple(shape)))):
    te.EstimatorSpec(EVAL, loss=tf.zeros(shape))


@pytest.mark.parametrize('spec_class', [te.EstimatorSpec, te.TPUEstimatorSpec])
@pytest.mark.parametrize('shape', [[None], [1, 1], [None, None], None])
def test_loss_of_one_element_or_unknown_size_is_accepted(graph, spec_class, shape):
  """As the original: only a statically known element count other than one is refused; any
  other shape compatible with one element is reshaped to a scalar."""
  loss = v1.placeholder_with_default(tf.reshape(tf.constant(2.5), [1] * len(shape or [1, 1])),
                                     shape)
  spec = spec_class(EVAL, loss=loss)
  if shape is not None:
    assert spec.loss.shape == tf.TensorShape([])
  assert _run(spec.loss) == pytest.approx(2.5)


def test_variables_are_accepted_where_tensors_are(graph):
  """The original took any TensorFlow tensor type, variables included, for the loss, the
  predictions and the metric values; they are read where they are returned."""
  weight = v1.get_variable('w', [2], initializer=v1.constant_initializer(1.5))
  scalar = v1.get_variable('s', [], initializer=v1.constant_initializer(0.5))
  spec = te.EstimatorSpec(TRAIN, loss=scalar, train_op=tf.no_op(),
                          predictions={'w': weight, 'p': tf.constant([1.0, 2.0])},
                          eval_metric_ops={'w': (weight, tf.no_op())})
  single = te.EstimatorSpec(PREDICT, predictions=weight)
  tpu = te.TPUEstimatorSpec(PREDICT, predictions={'w': weight})
  got = _run([spec.loss, spec.predictions['w'], single.predictions, tpu.predictions['w']])
  assert got[0] == pytest.approx(0.5)
  for value in got[1:]:
    np.testing.assert_allclose(value, [1.5, 1.5])
  assert sorted(single.export_outputs) == ['serving_default']


# --------------------------------------------------------------------------------------------
# train_op, predictions, eval_metric_ops, hooks, scaffold


def test_train_op_of_wrong_type(graph):
  with pytest.raises(TypeError, match=_match('train_op', "train_op='step'")):
    te.EstimatorSpec(TRAIN, loss=_loss(), train_op='step')


def test_predictions_tensor_or_dict_accepted(graph):
  tensor = tf.constant([1.0, 2.0])
  assert te.EstimatorSpec(PREDICT, predictions=tensor).predictions is tensor
  spec = te.EstimatorSpec(PREDICT, predictions={'p': tensor})
  assert spec.predictions == {'p': tensor}


def test_predictions_not_tensor_or_dict(graph):
  with pytest.raises(TypeError, match=_match('`predictions` must be a Tensor or a dict',
                                             'predictions=[1.0, 2.0]')):
    te.EstimatorSpec(PREDICT, predictions=[1.0, 2.0])


def test_prediction_dict_value_not_tensor(graph):
  with pytest.raises(TypeError, match=_match("predictions['scores']", 'value=0.5')):
    te.EstimatorSpec(PREDICT, predictions={'ok': tf.constant([1.0]), 'scores': 0.5})


def test_eval_metric_ops_accepts_metric_tuples(graph):
  labels = tf.constant([1, 0, 1])
  metric = v1.metrics.accuracy(labels, tf.constant([1, 1, 1]))
  spec = te.EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={'accuracy': metric})
  assert spec.eval_metric_ops == {'accuracy': metric}


def test_eval_metric_ops_accept_updated_keras_metrics(graph):
  """A Keras Metric becomes (result(), its update), its variables local and metric variables
  (never checkpointed); one never updated is refused with the original's words."""
  metric = tf.keras.metrics.Mean(name='m')
  metric.update_state(tf.constant([1.0, 3.0]))
  spec = te.EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={'m': metric})
  value, update = spec.eval_metric_ops['m']
  variables = [v.value for v in metric.variables]
  for collection, present in ((v1.GraphKeys.LOCAL_VARIABLES, True),
                              (v1.GraphKeys.METRIC_VARIABLES, True),
                              (v1.GraphKeys.GLOBAL_VARIABLES, False)):
    got = v1.get_collection(collection)
    assert all(any(v is g for g in got) == present for v in variables), collection
  with v1.Session() as sess:
    sess.run(v1.local_variables_initializer())
    sess.run(update)
    sess.run(update)
    assert sess.run(value) == pytest.approx(2.0)
  def metric_fn(labels):  # TPUEstimatorSpec's eval_metrics may return Metric objects too
    label_mean = tf.keras.metrics.Mean(name='label_mean')
    label_mean.update_state(labels)
    return {'label_mean': label_mean}

  tpu = te.TPUEstimatorSpec(EVAL, loss=_loss(), eval_metrics=(metric_fn, [tf.constant([4.])]))
  tpu_value, tpu_update = tpu.as_estimator_spec().eval_metric_ops['label_mean']
  with v1.Session() as sess:
    sess.run(v1.local_variables_initializer())
    sess.run(tpu_update)
    assert sess.run(tpu_value) == pytest.approx(4.0)
  idle = tf.keras.metrics.Mean(name='idle')
  with pytest.raises(ValueError, match=_match('Please call update_state(...) on the "idle"')):
    te.EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={'idle': idle})


def test_eval_metric_ops_not_a_dict(graph):
  metric = v1.metrics.mean(tf.constant([1.0]))
  with pytest.raises(TypeError, match=_match('`eval_metric_ops` must be a dict',
                                             'eval_metric_ops=[(')):
    te.EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops=[metric])


@pytest.mark.parametrize('kind', ['tensor', 'triple', 'list'])
def test_eval_metric_value_not_a_value_update_tuple(graph, kind):
  value, update = v1.metrics.mean(tf.constant([1.0]))
  bad = {'tensor': value, 'triple': (value, update, update), 'list': [value, update]}[kind]
  with pytest.raises(TypeError, match=_match('(metric_value, update_op) tuples', "key='m'",
                                             'value=')):
    te.EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={'m': bad})


@pytest.mark.parametrize('field', ['training_chief_hooks', 'training_hooks', 'evaluation_hooks',
                                   'prediction_hooks'])
def test_hooks_must_be_session_run_hooks(graph, field):
  with pytest.raises(TypeError, match=_match(field, 'SessionRunHook', "hook='not a hook'")):
    te.EstimatorSpec(TRAIN, loss=_loss(), train_op=tf.no_op(),
                     **{field: [_Hook(), 'not a hook']})


def test_hooks_kept_as_tuples(graph):
  hook = _Hook()
  spec = te.EstimatorSpec(TRAIN, loss=_loss(), train_op=tf.no_op(), training_hooks=[hook],
                          training_chief_hooks=[hook])
  assert spec.training_hooks == (hook,)
  assert spec.training_chief_hooks == (hook,)


def test_scaffold_of_wrong_type(graph):
  with pytest.raises(TypeError, match=_match('`scaffold`', 'Scaffold', "scaffold='saver'")):
    te.EstimatorSpec(EVAL, loss=_loss(), scaffold='saver')


def test_scaffold_given_is_kept(graph):
  scaffold = v1.train.Scaffold()
  assert te.EstimatorSpec(EVAL, loss=_loss(), scaffold=scaffold).scaffold is scaffold


# --------------------------------------------------------------------------------------------
# Tensors from another graph


@pytest.mark.parametrize('field', ['loss', 'train_op', 'predictions', 'prediction_dict',
                                   'eval_metric_ops'])
def test_tensors_from_another_graph_rejected(graph, field):
  other_scalar, other_op, other_vector = _other_graph_tensors()
  kwargs = {'loss': _loss(), 'train_op': tf.no_op()}
  mode = TRAIN
  if field == 'loss':
    kwargs['loss'] = other_scalar
  elif field == 'train_op':
    kwargs['train_op'] = other_op
  elif field == 'predictions':
    mode, kwargs = PREDICT, {'predictions': other_vector}
  elif field == 'prediction_dict':
    mode, kwargs = PREDICT, {'predictions': {'here': tf.constant([1.0]), 'p': other_vector}}
  else:
    kwargs['eval_metric_ops'] = {'m': (other_scalar, other_op)}
  name = {'prediction_dict': 'predictions', 'eval_metric_ops': "eval_metric_ops['m']"}.get(
      field, field)
  with pytest.raises(ValueError, match=_match('`%s`' % name, 'must be from the default graph')):
    te.EstimatorSpec(mode, **kwargs)


# --------------------------------------------------------------------------------------------
# export_outputs


def test_predict_gets_default_serving_export_output(graph):
  predictions = {'classes': tf.constant([1, 2]), 'scores': tf.constant([0.5, 0.7])}
  spec = te.EstimatorSpec(PREDICT, predictions=predictions)
  assert list(spec.export_outputs) == ['serving_default']
  default = spec.export_outputs['serving_default']
  assert isinstance(default, export_output.PredictOutput)
  assert default.outputs == predictions


def test_predict_tensor_gets_default_serving_export_output(graph):
  tensor = tf.constant([1.0, 2.0])
  default = te.EstimatorSpec(PREDICT, predictions=tensor).export_outputs['serving_default']
  assert list(default.outputs.values()) == [tensor]


def test_single_export_output_is_also_the_default(graph):
  head = export_output.PredictOutput({'p': tf.constant([1.0])})
  spec = te.EstimatorSpec(PREDICT, predictions=tf.constant([1.0]), export_outputs={'head': head})
  assert spec.export_outputs['head'] is head
  assert spec.export_outputs['serving_default'] is head


def test_multiple_export_outputs_need_a_default(graph):
  outputs = {'a': export_output.PredictOutput({'p': tf.constant([1.0])}),
             'b': export_output.PredictOutput({'q': tf.constant([2.0])})}
  with pytest.raises(ValueError, match=_match('Multiple', 'export_outputs', 'default')):
    te.EstimatorSpec(PREDICT, predictions=tf.constant([1.0]), export_outputs=outputs)
  outputs['serving_default'] = outputs['a']
  spec = te.EstimatorSpec(PREDICT, predictions=tf.constant([1.0]), export_outputs=outputs)
  assert set(spec.export_outputs) == {'a', 'b', 'serving_default'}


def test_export_outputs_must_be_dict_of_export_outputs(graph):
  predictions = tf.constant([1.0])
  with pytest.raises(TypeError, match=_match('`export_outputs` must be a dict',
                                             'export_outputs=[')):
    te.EstimatorSpec(PREDICT, predictions=predictions, export_outputs=[predictions])
  with pytest.raises(TypeError, match=_match('ExportOutput', "key='serving_default'", 'value=')):
    te.EstimatorSpec(PREDICT, predictions=predictions,
                     export_outputs={'serving_default': predictions})


# --------------------------------------------------------------------------------------------
# namedtuple behaviour


def test_replace_revalidates(graph):
  spec = te.EstimatorSpec(EVAL, loss=_loss())
  with pytest.raises(ValueError, match=_match('Missing loss', 'loss=None')):
    spec._replace(loss=None)
  replaced = spec._replace(loss=tf.constant([4.0]))
  assert replaced.loss.shape == tf.TensorShape([])
  assert isinstance(replaced, te.EstimatorSpec)
  assert spec.loss.shape == tf.TensorShape([])  # the original spec is unchanged


def test_replace_cannot_change_mode(graph):
  spec = te.EstimatorSpec(EVAL, loss=_loss())
  with pytest.raises(ValueError, match=_match('mode', 'cannot be changed', "mode='train'")):
    spec._replace(mode=TRAIN, train_op=tf.no_op())
  assert spec._replace(mode=EVAL).mode == EVAL


def test_namedtuple_indexing(graph):
  loss, train_op = _loss(), tf.no_op()
  spec = te.EstimatorSpec(TRAIN, loss=loss, train_op=train_op)
  assert isinstance(spec, tuple)
  assert spec._fields == ('mode', 'predictions', 'loss', 'train_op', 'eval_metric_ops',
                          'export_outputs', 'training_chief_hooks', 'training_hooks',
                          'scaffold', 'evaluation_hooks', 'prediction_hooks')
  assert len(spec) == 11
  assert spec[0] == TRAIN and spec[2] is loss and spec[3] is train_op
  mode, _, got_loss, got_op = spec[:4]
  assert (mode, got_loss, got_op) == (TRAIN, loss, train_op)
  assert spec._asdict()['loss'] is loss


# --------------------------------------------------------------------------------------------
# TPUEstimatorSpec


def _metric_fn(labels, logits):
  return {'accuracy': v1.metrics.accuracy(labels, tf.argmax(logits, 1))}


def _labels_logits():
  return (tf.constant([0, 1, 1]),
          tf.constant([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]))  # predicts 0, 1, 0: 2 of 3 right


def test_tpu_spec_field_order(graph):
  assert te.TPUEstimatorSpec._fields == (
      'mode', 'predictions', 'loss', 'train_op', 'eval_metrics', 'export_outputs',
      'scaffold_fn', 'host_call', 'training_hooks', 'evaluation_hooks', 'prediction_hooks')
  loss, op = _loss(), tf.no_op()
  spec = te.TPUEstimatorSpec(TRAIN, None, loss, op)  # positional, in that order
  assert spec.loss is loss and spec.train_op is op
  assert spec.eval_metrics is None and spec.host_call is None and spec.scaffold_fn is None
  assert spec.training_hooks == () and spec.evaluation_hooks == () and spec.prediction_hooks == ()


# Validated when built, as the original's TPUEstimatorSpec was (its messages, from TF 2.15 +
# tensorflow-estimator 2.15: "Missing train_op.", "Loss must be scalar, given: ...",
# "predictions must be Tensor, given: 3"), not steps later when the estimator reads the spec.

def test_tpu_spec_without_train_op_in_train_fails_where_built(graph):
  with pytest.raises(ValueError, match=_match('Missing train_op', 'train_op=None', "'train'")):
    te.TPUEstimatorSpec(TRAIN, loss=_loss())


@pytest.mark.parametrize('mode', [TRAIN, EVAL])
def test_tpu_spec_without_loss_fails_where_built(graph, mode):
  with pytest.raises(ValueError, match=_match('Missing loss', 'loss=None', repr(mode))):
    te.TPUEstimatorSpec(mode, train_op=tf.no_op())


@pytest.mark.parametrize('shape', [[2], [2, 3]])
def test_tpu_spec_loss_must_be_scalar(graph, shape):
  with pytest.raises(ValueError, match=_match('Loss must be scalar, given:',
                                              str(tuple(shape)))):
    te.TPUEstimatorSpec(EVAL, loss=tf.zeros(shape))


def test_tpu_spec_loss_of_shape_1_becomes_a_scalar(graph):
  spec = te.TPUEstimatorSpec(EVAL, loss=tf.constant([3.5]))
  assert spec.loss.shape == tf.TensorShape([])
  assert _run(spec.loss) == pytest.approx(3.5)


@pytest.mark.parametrize('mode', [PREDICT, TRAIN])
def test_tpu_spec_predictions_must_be_tensors(graph, mode):
  kwargs = {'loss': _loss(), 'train_op': tf.no_op()} if mode == TRAIN else {}
  with pytest.raises(TypeError, match=_match('predictions must be Tensor, given: 3',
                                             'predictions=3')):
    te.TPUEstimatorSpec(mode, predictions=3, **kwargs)
  with pytest.raises(TypeError, match=_match("predictions['p'] must be a Tensor", 'value=3')):
    te.TPUEstimatorSpec(mode, predictions={'p': 3}, **kwargs)


def test_tpu_spec_predict_needs_predictions_and_valid_export_outputs(graph):
  with pytest.raises(ValueError, match=_match('Missing predictions', 'predictions=None')):
    te.TPUEstimatorSpec(PREDICT)
  with pytest.raises(TypeError, match=_match('ExportOutput', "key='x'", 'value=3')):
    te.TPUEstimatorSpec(PREDICT, predictions={'p': tf.constant([1.0])}, export_outputs={'x': 3})


def test_tpu_spec_train_op_of_wrong_type(graph):
  with pytest.raises(TypeError, match=_match('train_op', 'train_op=3')):
    te.TPUEstimatorSpec(TRAIN, loss=_loss(), train_op=3)


@pytest.mark.parametrize('name', ['eval_metrics', 'host_call'])
@pytest.mark.parametrize('kind', ['string', 'one', 'three'])
def test_host_fn_must_be_a_pair(graph, name, kind):
  tensors = [tf.constant([1.0])]
  value = {'string': 'metric_fn', 'one': (_metric_fn,),
           'three': (_metric_fn, tensors, tensors)}[kind]
  with pytest.raises(TypeError, match=_match('`%s`' % name, '(fn, tensors)', '%s=' % name)):
    te.TPUEstimatorSpec(EVAL, loss=_loss(), **{name: value})


@pytest.mark.parametrize('name', ['eval_metrics', 'host_call'])
def test_host_fn_function_must_be_callable(graph, name):
  with pytest.raises(TypeError, match=_match('`%s[0]` must be callable' % name,
                                             '%s=42' % name)):
    te.TPUEstimatorSpec(EVAL, loss=_loss(), **{name: (42, [tf.constant([1.0])])})


@pytest.mark.parametrize('name', ['eval_metrics', 'host_call'])
def test_host_fn_tensors_must_be_list_tuple_or_dict(graph, name):
  with pytest.raises(TypeError, match=_match('`%s[1]`' % name, 'list, tuple or dict',
                                             "%s=<tf.Tensor" % name)):
    te.TPUEstimatorSpec(EVAL, loss=_loss(), **{name: (_metric_fn, tf.constant([1.0]))})


@pytest.mark.parametrize('name', ['eval_metrics', 'host_call'])
@pytest.mark.parametrize('count', [1, 3])
def test_host_fn_tensor_count_must_match_arguments(graph, name, count):
  tensors = [tf.constant([1.0])] * count
  with pytest.raises(ValueError, match=_match('`%s`' % name, 'takes 2 arguments',
                                              '%d tensors' % count,
                                              "arguments=['labels', 'logits']")):
    te.TPUEstimatorSpec(EVAL, loss=_loss(), **{name: (_metric_fn, tensors)})


def test_host_fn_accepted_forms(graph):
  labels, logits = _labels_logits()

  class Metrics:

    def fn(self, labels, logits):
      return {}

  def with_default(labels, logits=None):
    return {}

  def varargs(*tensors):
    return {}

  for value in [(_metric_fn, [labels, logits]), (_metric_fn, (labels, logits)),
                [_metric_fn, [labels, logits]], (_metric_fn, {'logits': logits, 'labels': labels}),
                (Metrics().fn, [labels, logits]), (with_default, [labels]),
                (varargs, [labels, logits, labels])]:
    spec = te.TPUEstimatorSpec(EVAL, loss=_loss(), eval_metrics=value, host_call=value)
    assert spec.eval_metrics is value and spec.host_call is value


@pytest.mark.parametrize('field', ['training_hooks', 'evaluation_hooks', 'prediction_hooks'])
def test_tpu_spec_hooks_must_be_session_run_hooks(graph, field):
  with pytest.raises(TypeError, match=_match(field, 'SessionRunHook', 'hook=3')):
    te.TPUEstimatorSpec(TRAIN, loss=_loss(), train_op=tf.no_op(), **{field: [_Hook(), 3]})
  hook = _Hook()
  spec = te.TPUEstimatorSpec(TRAIN, loss=_loss(), train_op=tf.no_op(), **{field: [hook]})
  assert getattr(spec, field) == (hook,)


def test_tpu_spec_scaffold_fn_must_be_callable(graph):
  with pytest.raises(TypeError, match=_match('`scaffold_fn` must be callable',
                                             'scaffold_fn=<tensorflow')):
    te.TPUEstimatorSpec(TRAIN, loss=_loss(), train_op=tf.no_op(),
                        scaffold_fn=v1.train.Scaffold())


def test_tpu_spec_replace_revalidates(graph):
  labels, logits = _labels_logits()
  spec = te.TPUEstimatorSpec(EVAL, loss=_loss(), eval_metrics=(_metric_fn, [labels, logits]))
  with pytest.raises(ValueError, match=_match('`eval_metrics`', 'takes 2 arguments')):
    spec._replace(eval_metrics=(_metric_fn, [labels]))
  assert isinstance(spec._replace(loss=_loss(2.0)), te.TPUEstimatorSpec)


def test_as_estimator_spec_list_form_metrics(graph):
  labels, logits = _labels_logits()
  loss = _loss(0.25)
  spec = te.TPUEstimatorSpec(EVAL, loss=loss, eval_metrics=(_metric_fn, [labels, logits]))
  estimator_spec = spec.as_estimator_spec()
  assert type(estimator_spec) is te.EstimatorSpec
  assert estimator_spec.mode == EVAL and estimator_spec.loss is loss
  assert sorted(estimator_spec.eval_metric_ops) == ['accuracy']
  value, update = estimator_spec.eval_metric_ops['accuracy']
  with v1.Session() as sess:
    sess.run(v1.local_variables_initializer())
    sess.run(update)
    assert sess.run(value) == pytest.approx(2 / 3)


def test_as_estimator_spec_dict_form_metrics_passed_by_name(graph):
  labels, logits = _labels_logits()
  seen = {}

  def metric_fn(labels, logits):
    seen.update(labels=labels, logits=logits)
    return _metric_fn(labels, logits)

  spec = te.TPUEstimatorSpec(EVAL, loss=_loss(),
                             eval_metrics=(metric_fn, {'logits': logits, 'labels': labels}))
  estimator_spec = spec.as_estimator_spec()
  assert seen == {'labels': labels, 'logits': logits}
  value, update = estimator_spec.eval_metric_ops['accuracy']
  with v1.Session() as sess:
    sess.run(v1.local_variables_initializer())
    sess.run(update)
    assert sess.run(value) == pytest.approx(2 / 3)


def test_as_estimator_spec_scaffold_fn_and_host_call(graph):
  scaffold = v1.train.Scaffold()
  hook = _Hook()
  calls = []

  def host_fn(loss):
    calls.append(loss)
    return tf.no_op()

  spec = te.TPUEstimatorSpec(TRAIN, loss=tf.constant([2.0]), train_op=tf.no_op(),
                             scaffold_fn=lambda: scaffold, training_hooks=[hook],
                             host_call=(host_fn, [tf.constant([2.0])]))
  estimator_spec = spec.as_estimator_spec()
  assert estimator_spec.scaffold is scaffold
  assert estimator_spec.loss.shape == tf.TensorShape([])  # validated like any EstimatorSpec
  assert len(calls) == 1
  assert estimator_spec.training_hooks[0] is hook
  assert len(estimator_spec.training_hooks) == 2  # plus the hook running the host call
  assert all(isinstance(h, v1.train.SessionRunHook) for h in estimator_spec.training_hooks)


def test_as_estimator_spec_host_call_runs_in_eval_too(graph):
  """The original appended the host-call hook to the training, evaluation and prediction
  hooks, so a host_call in an EVAL spec ran during evaluation."""
  spec = te.TPUEstimatorSpec(EVAL, loss=_loss(),
                             host_call=(lambda x: tf.no_op(), [tf.constant([1.0])]))
  assert len(spec.as_estimator_spec().evaluation_hooks) == 1


def test_as_estimator_spec_validates_for_the_mode(graph):
  with pytest.raises(ValueError, match=_match('Missing predictions', 'predictions=None')):
    te.TPUEstimatorSpec(PREDICT).as_estimator_spec()
  with pytest.raises(ValueError, match=_match('Missing loss', 'loss=None')):
    te.TPUEstimatorSpec(TRAIN, train_op=tf.no_op()).as_estimator_spec()

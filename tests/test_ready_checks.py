"""A new session's readiness checks (`checkpoints/scaffolds.add_ready_checks`): the names of
the variables left uninitialized, as TensorFlow's default Scaffold reports them, and a session
that is not ready still fails naming them."""
import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te
from tpu_estimator.checkpoints import scaffolds

v1 = tf.compat.v1


def _variables():
  first = v1.get_variable('first', initializer=1.0)
  second = v1.get_variable('scope/second', initializer=[2.0, 3.0])
  local = v1.get_variable('local', initializer=4.0, collections=[v1.GraphKeys.LOCAL_VARIABLES])
  return first, second, local


@pytest.mark.parametrize('initialized', [(), ('first',), ('scope/second', 'local'),
                                         ('first', 'scope/second', 'local')])
def test_ready_checks_report_what_tensorflows_defaults_report(graph, initialized):
  variables = _variables()
  expected_global = v1.report_uninitialized_variables(v1.global_variables())
  expected_all = v1.report_uninitialized_variables()
  scaffold = v1.train.Scaffold()
  scaffolds.add_ready_checks(scaffold)
  scaffold.finalize()
  with v1.Session() as session:
    session.run([v.initializer for v in variables if v.op.name in initialized])
    got_global, got_all, want_global, want_all = session.run(
        [scaffold.ready_for_local_init_op, scaffold.ready_op, expected_global, expected_all])
  assert list(got_global) == list(want_global)
  assert list(got_all) == list(want_all)


def test_a_scaffolds_own_ready_op_and_graphs_with_resources_keep_theirs(graph):
  _variables()
  own = tf.constant([], tf.string, name='own_ready')
  scaffold = v1.train.Scaffold(ready_op=own)
  scaffolds.add_ready_checks(scaffold)
  assert not v1.get_collection(v1.GraphKeys.READY_OP)
  assert len(v1.get_collection(v1.GraphKeys.READY_FOR_LOCAL_INIT_OP)) == 1
  scaffold.finalize()
  assert scaffold.ready_op is own

  with tf.Graph().as_default():
    _variables()
    v1.add_to_collection(v1.GraphKeys.RESOURCES, object())
    scaffolds.add_ready_checks(v1.train.Scaffold())
    assert not v1.get_collection(v1.GraphKeys.READY_OP)
    assert not v1.get_collection(v1.GraphKeys.READY_FOR_LOCAL_INIT_OP)


@pytest.mark.parametrize('shards', [None, 2])
def test_evaluate_with_a_saver_restoring_part_of_the_model_fails_naming_the_rest(tmp_path,
                                                                                shards):
  x, y = h.make_data(32)
  tpu = shards is not None
  model_fn = h.make_model_fn(tpu=tpu)

  def partial_restore(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    if mode != te.ModeKeys.EVAL:
      return spec
    kernel = [v for v in v1.global_variables() if 'kernel' in v.op.name]
    saver = v1.train.Saver(var_list=kernel)
    if tpu:
      return spec._replace(scaffold_fn=lambda: v1.train.Scaffold(saver=saver))
    return spec._replace(scaffold=v1.train.Scaffold(saver=saver))

  if tpu:
    est = te.TPUEstimator(partial_restore, config=h.tpu_config(shards, 4, model_dir=str(tmp_path)),
                          train_batch_size=16, eval_batch_size=16)
  else:
    est = te.Estimator(partial_restore, model_dir=str(tmp_path), params={'batch_size': 16})
  est.train(h.dataset_input_fn(x, y, 16), steps=2)
  with pytest.raises(RuntimeError, match='bias'):
    est.evaluate(h.dataset_input_fn(x, y, 16, repeat=False))

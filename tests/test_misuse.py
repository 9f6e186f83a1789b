"""Bad input never corrupts a model_dir (DESIGN §8): one table of misuses of specs, RunConfig,
TPUConfig, Estimator/TPUEstimator construction, train/evaluate/predict/export arguments,
host functions and batch sizes.  Each row asserts the exception type (wrong type → TypeError,
bad value → ValueError), that the message names the argument and the value received, and that
the model_dir, which holds a trained checkpoint, is byte-for-byte unchanged afterwards (every
file, including those under the export base and eval dirs inside it).

Some misuses can only be detected when `train`/`evaluate`/`predict`/`export` runs; those rows
make that call.
"""
import collections
import os
import shutil

import pytest
import tensorflow as tf

import helpers as h
import tpu_estimator as te

v1 = tf.compat.v1
X, Y = h.make_data(96)




@pytest.fixture(scope='module')
def trained_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp('misuse') / 'model')
  est = te.Estimator(h.make_model_fn(), model_dir=path, params={'batch_size': 16},
                     config=te.EstimatorRunConfig(save_checkpoints_steps=2))
  est.train(h.dataset_input_fn(X, Y), steps=4)
  est.evaluate(h.dataset_input_fn(X[:32], Y[:32], repeat=False))
  return path


@pytest.fixture
def model_dir(trained_dir, tmp_path):
  """A copy of the trained model_dir per row, so a row that is not caught cannot affect
  the others."""
  path = str(tmp_path / 'model')
  shutil.copytree(trained_dir, path)
  return path


class Ctx:
  """What a row needs: the trained model_dir and estimators/inputs over it."""

  def __init__(self, model_dir):
    self.model_dir = model_dir
    self.export_base = os.path.join(model_dir, 'export')
    self.missing_ckpt = os.path.join(model_dir, 'model.ckpt-999')
    self.train_input = h.dataset_input_fn(X, Y)
    self.eval_input = h.dataset_input_fn(X[:32], Y[:32], repeat=False)
    self.predict_input = h.dataset_input_fn(X[:32], Y[:32], repeat=False)
    self.receiver = te.export.build_raw_serving_input_receiver_fn(
        {'x': tf.zeros([1, h.NUM_FEATURES])})

  def est(self, model_fn=None, **kwargs):
    kwargs.setdefault('params', {'batch_size': 16})
    return te.Estimator(model_fn or h.make_model_fn(), model_dir=self.model_dir, **kwargs)

  def tpu(self, model_fn=None, shards=2, ipl=2, train=16, evaluate=16, predict=16,
          per_host=True, **kwargs):
    return te.TPUEstimator(
        model_fn or h.make_model_fn(tpu=True), use_tpu=kwargs.pop('use_tpu', True),
        config=h.tpu_config(shards, ipl, model_dir=self.model_dir,
                            per_host_input_for_training=per_host),
        train_batch_size=train, eval_batch_size=evaluate, predict_batch_size=predict,
        **kwargs)


def _wrap(change, tpu=False):
  """A model_fn building the normal spec (variables included), then returning
  `change(spec, features, labels, mode)`."""
  inner = h.make_model_fn(tpu=tpu)

  def model_fn(features, labels, mode, params):
    spec = inner(features, labels, mode, params)
    return change(spec, features, labels, mode)

  return model_fn


def _tpu_spec(spec, mode, **fields):
  base = dict(loss=spec.loss, train_op=spec.train_op)
  base.update(fields)
  return te.TPUEstimatorSpec(mode, **base)


_GLOBAL_GRAPH = tf.Graph()
with _GLOBAL_GRAPH.as_default():
  _FOREIGN_TENSOR = tf.zeros([16], name='made_outside_model_fn')


class _Cluster:
  def master(self):
    return 'grpc://cluster'

  def cluster_spec(self):
    return tf.train.ClusterSpec({})


class _FetchByName(v1.train.SessionRunHook):
  """A hook that fetches a tensor by its name each step."""

  def __init__(self, name):
    self._name = name

  def before_run(self, run_context):
    return v1.train.SessionRunArgs(self._name)


def _dataset_batched(size, repeat=False, drop_remainder=False):
  def input_fn(params):
    del params
    ds = tf.data.Dataset.from_tensor_slices(({'x': X}, Y))
    return (ds.repeat() if repeat else ds).batch(size, drop_remainder=drop_remainder)
  return input_fn


Row = collections.namedtuple('Row', ['id', 'call', 'error', 'names'])

# Each row: the misuse, the exception type, and substrings the message must contain: the
# argument's name and the value received (as the library's `Received: name=value` renders it).
ROWS = [
    # --- RunConfig ------------------------------------------------------------------------
    Row('runconfig_steps_and_secs',
        lambda c: te.RunConfig(save_checkpoints_steps=10, save_checkpoints_secs=60),
        ValueError, ['save_checkpoints_steps=10', 'save_checkpoints_secs=60']),
    Row('runconfig_negative_save_summary_steps',
        lambda c: te.EstimatorRunConfig(save_summary_steps=-1),
        ValueError, ['save_summary_steps', '-1']),
    Row('runconfig_negative_save_checkpoints_secs',
        lambda c: te.EstimatorRunConfig(save_checkpoints_secs=-5),
        ValueError, ['save_checkpoints_secs', '-5']),
    Row('runconfig_negative_keep_checkpoint_max',
        lambda c: te.EstimatorRunConfig(keep_checkpoint_max=-2),
        ValueError, ['keep_checkpoint_max', '-2']),
    Row('runconfig_zero_keep_checkpoint_every_n_hours',
        lambda c: te.EstimatorRunConfig(keep_checkpoint_every_n_hours=0),
        ValueError, ['keep_checkpoint_every_n_hours', '0']),
    Row('runconfig_zero_log_step_count_steps',
        lambda c: te.EstimatorRunConfig(log_step_count_steps=0),
        ValueError, ['log_step_count_steps', '0']),
    Row('runconfig_seed_not_int', lambda c: te.EstimatorRunConfig(tf_random_seed='7'),
        TypeError, ['tf_random_seed', "'7'"]),
    Row('runconfig_session_config_not_proto',
        lambda c: te.EstimatorRunConfig(session_config={'a': 1}),
        TypeError, ['session_config', "{'a': 1}"]),
    Row('runconfig_device_fn_wrong_args',
        lambda c: te.EstimatorRunConfig(device_fn=lambda a, b: None),
        ValueError, ['device_fn', "'a'", "'b'"]),
    Row('runconfig_empty_model_dir', lambda c: te.EstimatorRunConfig(model_dir=''),
        ValueError, ['model_dir', "''"]),
    Row('runconfig_model_dir_not_path', lambda c: te.EstimatorRunConfig(model_dir=5),
        TypeError, ['model_dir', '5']),
    Row('runconfig_bad_protocol', lambda c: te.EstimatorRunConfig(protocol='http'),
        ValueError, ['protocol', "'http'"]),
    Row('runconfig_replace_unknown_property',
        lambda c: te.EstimatorRunConfig().replace(foo_steps=3),
        ValueError, ['foo_steps', '3']),
    # --- TPUConfig / TPU RunConfig ----------------------------------------------------------
    Row('tpuconfig_zero_iterations_per_loop', lambda c: te.TPUConfig(iterations_per_loop=0),
        ValueError, ['iterations_per_loop', '0']),
    Row('tpuconfig_bad_duration', lambda c: te.TPUConfig(iterations_per_loop='10x'),
        ValueError, ['iterations_per_loop', "'10x'"]),
    Row('tpuconfig_bool_iterations_per_loop', lambda c: te.TPUConfig(iterations_per_loop=True),
        TypeError, ['iterations_per_loop', 'True']),
    Row('tpuconfig_zero_num_shards', lambda c: te.TPUConfig(num_shards=0),
        ValueError, ['num_shards', '0']),
    Row('tpuconfig_float_num_shards', lambda c: te.TPUConfig(num_shards=2.5),
        TypeError, ['num_shards', '2.5']),
    Row('tpuconfig_bad_num_cores_per_replica', lambda c: te.TPUConfig(num_cores_per_replica=3),
        ValueError, ['num_cores_per_replica', '3']),
    Row('tpuconfig_bad_input_mode', lambda c: te.TPUConfig(per_host_input_for_training=7),
        ValueError, ['per_host_input_for_training', '7']),
    Row('tpuconfig_zero_host_call_every_n_steps',
        lambda c: te.TPUConfig(experimental_host_call_every_n_steps=0),
        ValueError, ['experimental_host_call_every_n_steps', '0']),
    Row('tpu_runconfig_tpu_config_not_tpuconfig',
        lambda c: te.RunConfig(tpu_config={'num_shards': 2}),
        TypeError, ['tpu_config', "{'num_shards': 2}"]),
    Row('tpu_runconfig_master_and_cluster',
        lambda c: te.RunConfig(master='grpc://x', cluster=_Cluster()),
        ValueError, ['master', "'grpc://x'", 'cluster']),
    # --- Estimator construction -------------------------------------------------------------
    Row('estimator_model_fn_none', lambda c: te.Estimator(None, model_dir=c.model_dir),
        ValueError, ['model_fn', 'None']),
    Row('estimator_model_fn_not_callable',
        lambda c: te.Estimator('my_model_fn', model_dir=c.model_dir),
        TypeError, ['model_fn', "'my_model_fn'"]),
    Row('estimator_model_fn_without_features',
        lambda c: te.Estimator(lambda inputs, labels, mode: None, model_dir=c.model_dir),
        ValueError, ['features', "'inputs'"]),
    Row('estimator_model_fn_unknown_argument',
        lambda c: te.Estimator(lambda features, labels, mode, hparams: None,
                               model_dir=c.model_dir),
        ValueError, ['hparams']),
    Row('estimator_params_but_model_fn_takes_none',
        lambda c: te.Estimator(lambda features, labels, mode: None, model_dir=c.model_dir,
                               params={'lr': 1}),
        ValueError, ['params', "{'lr': 1}"]),
    Row('estimator_config_wrong_type', lambda c: c.est(config=te.TPUConfig()),
        TypeError, ['config', 'TPUConfig(']),
    Row('estimator_model_dir_conflict',
        lambda c: c.est(config=te.EstimatorRunConfig(model_dir=c.model_dir + '_other')),
        ValueError, ['model_dir', "_other'"]),
    Row('estimator_warm_start_from_wrong_type', lambda c: c.est(warm_start_from=3),
        TypeError, ['warm_start_from', '3']),
    Row('estimator_train_distribute_not_a_strategy',
        lambda c: c.est(config=te.EstimatorRunConfig(train_distribute='mirrored')),
        TypeError, ['train_distribute', "'mirrored'", 'MirroredStrategy()']),
    Row('warm_start_settings_empty_path', lambda c: te.WarmStartSettings(''),
        ValueError, ['ckpt_to_initialize_from', "''"]),
    # --- TPUEstimator construction ----------------------------------------------------------
    Row('tpu_estimator_plain_run_config',
        lambda c: te.TPUEstimator(h.make_model_fn(tpu=True), config=te.EstimatorRunConfig(),
                                  train_batch_size=16),
        TypeError, ['config', 'RunConfig(']),
    Row('tpu_estimator_train_distribute',
        lambda c: te.TPUEstimator(h.make_model_fn(tpu=True), train_batch_size=16, config=te.RunConfig(
            train_distribute=tf.distribute.OneDeviceStrategy('/cpu:0'))),
        ValueError, ['train_distribute', 'OneDeviceStrategy', 'num_shards']),
    Row('tpu_estimator_reserved_batch_size', lambda c: c.tpu(params={'batch_size': 8}),
        ValueError, ['batch_size', "{'batch_size': 8}"]),
    Row('tpu_estimator_reserved_context', lambda c: c.tpu(params={'context': 1}),
        ValueError, ['context', "{'context': 1}"]),
    Row('tpu_estimator_train_batch_size_none', lambda c: c.tpu(train=None),
        ValueError, ['train_batch_size', 'None']),
    Row('tpu_estimator_negative_train_batch_size', lambda c: c.tpu(train=-8),
        ValueError, ['train_batch_size', '-8']),
    Row('tpu_estimator_float_eval_batch_size', lambda c: c.tpu(evaluate=2.5),
        TypeError, ['eval_batch_size', '2.5']),
    Row('tpu_estimator_str_predict_batch_size', lambda c: c.tpu(predict='8'),
        TypeError, ['predict_batch_size', "'8'"]),
    Row('tpu_estimator_use_tpu_not_bool', lambda c: c.tpu(use_tpu='yes'),
        TypeError, ['use_tpu', "'yes'"]),
    Row('tpu_estimator_bad_export_api_version',
        lambda c: c.tpu(export_saved_model_api_version=3),
        ValueError, ['export_saved_model_api_version', '3']),
    Row('tpu_estimator_model_fn_without_params',
        lambda c: c.tpu(model_fn=lambda features, labels, mode: None),
        ValueError, ['params', "'features'"]),
    Row('tpu_estimator_embedding_config_spec',
        lambda c: c.tpu(embedding_config_spec='my_embedding_config'),
        TypeError, ['embedding_config_spec', "'my_embedding_config'"]),
    # --- batch sizes vs shards (detected when the call runs) --------------------------------
    Row('train_batch_size_not_divisible_by_shards',
        lambda c: c.tpu(shards=4, train=30).train(c.train_input, steps=1),
        ValueError, ['train_batch_size=30', '4']),
    Row('eval_batch_size_not_divisible_by_shards',
        lambda c: c.tpu(shards=4, evaluate=10).evaluate(c.eval_input),
        ValueError, ['eval_batch_size=10', '4']),
    Row('predict_batch_size_not_divisible_by_shards',
        lambda c: next(c.tpu(shards=4, predict=6).predict(c.predict_input)),
        ValueError, ['predict_batch_size=6', '4']),
    Row('eval_batch_size_missing_with_use_tpu',
        lambda c: c.tpu(evaluate=None).evaluate(c.eval_input),
        ValueError, ['eval_batch_size', 'None']),
    Row('predict_batch_size_missing_with_use_tpu',
        lambda c: next(c.tpu(predict=None).predict(c.predict_input)),
        ValueError, ['predict_batch_size', 'None']),
    # With a static batch size the mismatch is caught before anything runs; a dynamic one fails
    # at the first batch (test_reliability: an error naming both sizes, no hang).
    Row('input_fn_batch_differs_from_train_batch_size',
        lambda c: c.tpu(train=16).train(_dataset_batched(10, drop_remainder=True), steps=3),
        (ValueError, tf.errors.InvalidArgumentError), ['16', '10']),
    Row('tpu_input_fn_without_params',
        lambda c: c.tpu().train(
            lambda: tf.data.Dataset.from_tensor_slices(({'x': X}, Y)).repeat().batch(16),
            steps=1),
        ValueError, ['input_fn', 'params']),
    Row('batch_axis_does_not_match_input',
        lambda c: c.tpu(batch_axis=(0, 0, 0)).train(c.train_input, steps=1),
        ValueError, ['batch_axis', '(0, 0, 0)']),
    # --- train arguments --------------------------------------------------------------------
    Row('train_steps_and_max_steps', lambda c: c.est().train(c.train_input, steps=1, max_steps=5),
        ValueError, ['steps=1', 'max_steps=5']),
    Row('train_zero_steps', lambda c: c.est().train(c.train_input, steps=0),
        ValueError, ['steps', '0']),
    Row('train_negative_max_steps', lambda c: c.est().train(c.train_input, max_steps=-1),
        ValueError, ['max_steps', '-1']),
    Row('train_steps_not_int', lambda c: c.est().train(c.train_input, steps='10'),
        TypeError, ['steps', "'10'"]),
    Row('train_hook_not_a_hook', lambda c: c.est().train(c.train_input, steps=1,
                                                         hooks=[object()]),
        TypeError, ['hook', '<object object']),
    Row('train_listener_not_a_listener',
        lambda c: c.est().train(c.train_input, steps=1, saving_listeners=['on_save']),
        TypeError, ['saving_listeners', "'on_save'"]),
    Row('train_input_fn_not_callable', lambda c: c.est().train('train.tfrecord', steps=1),
        TypeError, ['input_fn', "'train.tfrecord'"]),
    Row('train_input_fn_returns_string', lambda c: c.est().train(lambda: 'nope', steps=1),
        TypeError, ['input_fn', "'nope'"]),
    Row('tpu_train_steps_and_max_steps',
        lambda c: c.tpu().train(c.train_input, steps=2, max_steps=9),
        ValueError, ['steps=2', 'max_steps=9']),
    # --- evaluate / predict arguments -------------------------------------------------------
    Row('evaluate_zero_steps', lambda c: c.est().evaluate(c.eval_input, steps=0),
        ValueError, ['steps', '0']),
    Row('evaluate_name_not_string', lambda c: c.est().evaluate(c.eval_input, name=5),
        TypeError, ['name', '5']),
    Row('evaluate_missing_checkpoint_path',
        lambda c: c.est().evaluate(c.eval_input, checkpoint_path=c.missing_ckpt),
        ValueError, ['checkpoint_path', 'model.ckpt-999']),
    Row('evaluate_hooks_not_hooks', lambda c: c.est().evaluate(c.eval_input, hooks=['h']),
        TypeError, ['hook', "'h'"]),
    Row('predict_keys_not_list', lambda c: next(c.est().predict(c.predict_input,
                                                                predict_keys=5)),
        TypeError, ['predict_keys', '5']),
    Row('predict_unknown_keys', lambda c: next(c.est().predict(c.predict_input,
                                                               predict_keys=['nope'])),
        ValueError, ['predict_keys', "['nope']"]),
    Row('predict_missing_checkpoint_path',
        lambda c: next(c.est().predict(c.predict_input, checkpoint_path=c.missing_ckpt)),
        ValueError, ['checkpoint_path', 'model.ckpt-999']),
    # --- export arguments -------------------------------------------------------------------
    Row('export_receiver_fn_none', lambda c: c.est().export_saved_model(c.export_base, None),
        TypeError, ['serving_input_receiver_fn', 'None']),
    Row('export_dir_base_not_path', lambda c: c.est().export_saved_model(5, c.receiver),
        TypeError, ['export_dir_base', '5']),
    Row('export_unknown_mode',
        lambda c: c.est().export_saved_model(c.export_base, c.receiver,
                                             experimental_mode='serve'),
        ValueError, ['experimental_mode', "'serve'"]),
    Row('export_train_mode_not_a_receiver',
        lambda c: c.est().export_saved_model(c.export_base, lambda: 'x',
                                             experimental_mode=te.ModeKeys.TRAIN),
        TypeError, ['SupervisedInputReceiver', "returned='x'"]),
    Row('export_receiver_fn_returns_dict',
        lambda c: c.est().export_saved_model(c.export_base,
                                             lambda: {'x': v1.placeholder(tf.float32)}),
        TypeError, ['serving_input_receiver_fn', "{'x': <tf.Tensor"]),
    Row('export_assets_extra_not_dict',
        lambda c: c.est().export_saved_model(c.export_base, c.receiver, assets_extra='vocab.txt'),
        TypeError, ['assets_extra', "'vocab.txt'"]),
    Row('export_missing_checkpoint_path',
        lambda c: c.est().export_saved_model(c.export_base, c.receiver,
                                             checkpoint_path=c.missing_ckpt),
        ValueError, ['checkpoint_path', 'model.ckpt-999']),
    Row('export_all_empty_map',
        lambda c: c.est().experimental_export_all_saved_models(c.export_base, {}),
        ValueError, ['input_receiver_fn_map', '{}']),
    Row('export_all_unknown_mode',
        lambda c: c.est().experimental_export_all_saved_models(
            c.export_base, {'serve': c.receiver}),
        ValueError, ['modes', "'serve'"]),
    Row('tpu_export_no_target',
        lambda c: c.tpu(export_to_cpu=False, export_to_tpu=False).export_saved_model(
            c.export_base, c.receiver),
        ValueError, ['export_to_cpu=False', 'export_to_tpu=False']),
    # --- model_fn return values (detected when model_fn runs) -------------------------------
    Row('model_fn_returns_none',
        lambda c: c.est(_wrap(lambda s, f, l, m: None)).train(c.train_input, steps=1),
        TypeError, ['EstimatorSpec', 'returned=None']),
    Row('model_fn_returns_tuple',
        lambda c: c.est(_wrap(lambda s, f, l, m: (s.loss, s.train_op))).train(c.train_input,
                                                                                steps=1),
        TypeError, ['EstimatorSpec', 'returned=(<tf.Tensor']),
    Row('estimator_model_fn_returns_tpu_spec',
        lambda c: c.est(_wrap(lambda s, f, l, m: _tpu_spec(s, m))).train(c.train_input,
                                                                          steps=1),
        TypeError, ['EstimatorSpec', 'returned=TPUEstimatorSpec(']),
    Row('model_fn_returns_spec_of_another_mode',
        lambda c: c.est(_wrap(lambda s, f, l, m: te.EstimatorSpec(te.ModeKeys.EVAL,
                                                                  loss=s.loss))).train(
                                                                      c.train_input, steps=1),
        ValueError, ['mode', "'eval'", "'train'"]),
    Row('spec_loss_not_scalar',
        lambda c: c.est(_wrap(lambda s, f, l, m: te.EstimatorSpec(
            m, loss=tf.ones([16]), train_op=s.train_op))).train(c.train_input, steps=1),
        ValueError, ['loss', '16']),
    Row('spec_loss_not_tensor',
        lambda c: c.est(_wrap(lambda s, f, l, m: te.EstimatorSpec(
            m, loss=1.5, train_op=s.train_op))).train(c.train_input, steps=1),
        TypeError, ['loss', '1.5']),
    Row('spec_train_op_missing',
        lambda c: c.est(_wrap(lambda s, f, l, m: te.EstimatorSpec(m, loss=s.loss))).train(
            c.train_input, steps=1),
        ValueError, ['train_op', 'None']),
    Row('spec_tensor_from_another_graph',
        lambda c: next(c.est(_wrap(lambda s, f, l, m: te.EstimatorSpec(
            m, predictions={'p': _FOREIGN_TENSOR}))).predict(c.predict_input)),
        ValueError, ['predictions', 'made_outside_model_fn']),
    Row('spec_prediction_not_tensor',
        lambda c: next(c.est(_wrap(lambda s, f, l, m: te.EstimatorSpec(
            m, predictions={'p': [1, 2]}))).predict(c.predict_input)),
        TypeError, ['predictions', '[1, 2]']),
    Row('eval_metric_ops_not_dict',
        lambda c: c.est(_wrap(lambda s, f, l, m: s._replace(
            eval_metric_ops=[v1.metrics.mean(s.loss)]) if m == te.ModeKeys.EVAL else s)
                       ).evaluate(c.eval_input),
        TypeError, ['eval_metric_ops', '[(<tf.Tensor']),
    Row('eval_metric_named_loss',
        lambda c: c.est(_wrap(lambda s, f, l, m: s._replace(
            eval_metric_ops={'loss': v1.metrics.mean(s.loss)}) if m == te.ModeKeys.EVAL else s)
                       ).evaluate(c.eval_input),
        ValueError, ['loss', "['loss']"]),
    Row('eval_metric_value_not_a_pair',
        lambda c: c.est(_wrap(lambda s, f, l, m: s._replace(
            eval_metric_ops={'acc': s.loss}) if m == te.ModeKeys.EVAL else s)
                       ).evaluate(c.eval_input),
        TypeError, ['eval_metric_ops', "'acc'"]),
    Row('tpu_predictions_missing',
        lambda c: next(c.tpu(_wrap(lambda s, f, l, m: te.TPUEstimatorSpec(m), tpu=True)
                             ).predict(c.predict_input)),
        ValueError, ['predictions', 'None']),
    Row('tpu_scaffold_fn_returns_wrong_type',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(scaffold_fn=lambda: 'scaffold'),
                              tpu=True)).train(c.train_input, steps=1),
        TypeError, ['scaffold_fn', "'scaffold'"]),
    Row('sharded_estimator_spec_with_eval_metric_ops',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s)).evaluate(c.eval_input),
        ValueError, ['eval_metric_ops', 'eval_metrics', "'accuracy'"]),
    # --- eval_metrics / host_call shapes ----------------------------------------------------
    Row('host_call_scalar_tensor_when_sharded',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(host_call=(
            lambda loss: v1.summary.scalar('l', tf.reduce_mean(loss)), [s.loss])), tpu=True)
                        ).train(c.train_input, steps=1),
        ValueError, ['host_call', 'rank', 'shape=()']),
    Row('eval_metrics_scalar_tensor_when_sharded',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(eval_metrics=(
            lambda loss: {'mean_loss': v1.metrics.mean(loss)}, [s.loss])), tpu=True)
                        ).evaluate(c.eval_input),
        ValueError, ['eval_metrics', 'rank', 'shape=()']),
    Row('eval_metrics_not_a_pair',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(
            eval_metrics=(lambda labels: {},)), tpu=True)).evaluate(c.eval_input),
        TypeError, ['eval_metrics', '(<function']),
    Row('eval_metrics_tensor_count_mismatch',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(eval_metrics=(
            lambda labels, logits: {}, [l])), tpu=True)).evaluate(c.eval_input),
        ValueError, ['eval_metrics', "['labels', 'logits']", 'num_tensors=1']),
    Row('eval_metrics_fn_returns_list',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(eval_metrics=(
            lambda labels: [v1.metrics.mean(tf.cast(labels, tf.float32))],
            [l])) if m == te.ModeKeys.EVAL else s, tpu=True)).evaluate(c.eval_input),
        TypeError, ['eval_metrics', '[(<tf.Tensor']),
    Row('host_call_fn_not_callable',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(
            host_call=('summaries', [tf.reshape(s.loss, [1])])), tpu=True)
                        ).train(c.train_input, steps=1),
        TypeError, ['host_call', "'summaries'"]),
    Row('host_call_tensors_not_a_list',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(
            host_call=(lambda loss: [], 'loss')), tpu=True)).train(c.train_input, steps=1),
        TypeError, ['host_call', "'loss'"]),
    # A spec's hook reading model_fn's tensors, which use_tpu=True builds inside the loop:
    # failing in the hook's begin() (LoggingTensorHook) or when it asks for them (NanTensor).
    Row('tpu_training_hook_reads_a_tensor_of_the_loop',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(training_hooks=[
            v1.train.LoggingTensorHook({'loss': s.loss}, every_n_iter=1)]), tpu=True)).train(
                c.train_input, steps=2),
        ValueError, ['training_hooks', 'LoggingTensorHook', 'host_call', 'use_tpu=False']),
    Row('tpu_evaluation_hook_reads_a_tensor_of_the_loop',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(evaluation_hooks=[
            v1.train.NanTensorHook(s.loss)]), tpu=True)).evaluate(c.eval_input),
        ValueError, ['evaluation_hooks', 'NanTensorHook', 'eval_metrics']),
    Row('tpu_training_hook_reads_a_tensor_of_the_loop_by_name',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(training_hooks=[
            v1.train.LoggingTensorHook({'loss': s.loss.name}, every_n_iter=1)]),
                              tpu=True)).train(c.train_input, steps=2),
        ValueError, ['training_hooks', 'LoggingTensorHook', 'host_call', 'misspelled']),
    Row('tpu_training_hook_fetches_a_tensor_of_the_loop_by_name',
        lambda c: c.tpu(_wrap(lambda s, f, l, m: s._replace(training_hooks=[
            _FetchByName(s.loss.name)]), tpu=True)).train(c.train_input, steps=2),
        ValueError, ['training_hooks', '_FetchByName', 'host_call']),
]


def test_table_has_at_least_40_distinct_misuses():
  assert len(ROWS) >= 40
  assert len({r.id for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize('row', ROWS, ids=[r.id for r in ROWS])
def test_misuse_raises_named_error_and_leaves_model_dir_unchanged(model_dir, row):
  ctx = Ctx(model_dir)
  before = h.snapshot(model_dir)
  assert any(name.endswith('.index') for name in before)  # something to corrupt
  with pytest.raises(row.error) as info:
    row.call(ctx)
  message = str(info.value)
  missing = [name for name in row.names if name not in message]
  assert not missing, 'message lacks %s: %s' % (missing, message)
  after = h.snapshot(model_dir)
  changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
  assert not changed, 'model_dir changed: %s' % changed
  assert tf.train.latest_checkpoint(model_dir).endswith('model.ckpt-4')

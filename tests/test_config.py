"""RunConfig, TF_CONFIG parsing, TPUConfig, the TPU RunConfig, and the checks the Estimator and
TPUEstimator constructors make (construction only: nothing is trained here).

Every error case checks the exception type and that the message names the argument and the
value received.
"""
import functools
import json
import os
import pathlib
import re
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator import config as config_lib

v1 = tf.compat.v1
CoreRunConfig = te.EstimatorRunConfig  # tf.estimator.RunConfig
IPC = te.InputPipelineConfig

CLUSTER = {'chief': ['host0:2222'], 'worker': ['host1:2222', 'host2:2222'],
           'ps': ['host3:2222']}


def _match(*fragments):
  """A `match=` regex requiring every literal fragment somewhere in the message."""
  return '(?s)' + ''.join('(?=.*%s)' % re.escape(f) for f in fragments)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
  """No TF_CONFIG from the environment; any temporary model_dir lands under tmp_path."""
  monkeypatch.delenv('TF_CONFIG', raising=False)
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))


def _set_tf_config(monkeypatch, task_type, index, cluster=None, **extra):
  value = dict(cluster=cluster or CLUSTER, task={'type': task_type, 'index': index}, **extra)
  monkeypatch.setenv('TF_CONFIG', json.dumps(value))


# --------------------------------------------------------------------------------------------
# RunConfig: defaults and validation


def test_run_config_defaults():
  config = CoreRunConfig()
  assert config.save_checkpoints_secs == 600
  assert config.save_checkpoints_steps is None
  assert config.keep_checkpoint_max == 5
  assert config.keep_checkpoint_every_n_hours == 10000
  assert config.log_step_count_steps == 100
  assert config.save_summary_steps == 100
  assert config.model_dir is None
  assert config.tf_random_seed is None
  assert config.session_config is None
  assert config.device_fn is None
  # Local (no TF_CONFIG): a single chief worker.
  assert config.task_type == 'worker' and config.task_id == 0
  assert config.is_chief is True
  assert config.num_worker_replicas == 1 and config.num_ps_replicas == 0
  assert config.master == ''


def test_save_checkpoints_steps_or_secs_replaces_the_default():
  by_steps = CoreRunConfig(save_checkpoints_steps=50)
  assert (by_steps.save_checkpoints_steps, by_steps.save_checkpoints_secs) == (50, None)
  by_secs = CoreRunConfig(save_checkpoints_secs=30)
  assert (by_secs.save_checkpoints_steps, by_secs.save_checkpoints_secs) == (None, 30)
  neither = CoreRunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
  assert (neither.save_checkpoints_steps, neither.save_checkpoints_secs) == (None, None)


def test_save_checkpoints_steps_and_secs_mutually_exclusive():
  with pytest.raises(ValueError, match=_match('save_checkpoints_steps', 'save_checkpoints_secs',
                                              'save_checkpoints_steps=10',
                                              'save_checkpoints_secs=5')):
    CoreRunConfig(save_checkpoints_steps=10, save_checkpoints_secs=5)


@pytest.mark.parametrize('name', ['save_summary_steps', 'save_checkpoints_steps',
                                  'save_checkpoints_secs', 'keep_checkpoint_max',
                                  'keep_checkpoint_every_n_hours', 'log_step_count_steps',
                                  'session_creation_timeout_secs'])
def test_negative_values_rejected(name):
  with pytest.raises(ValueError, match=_match('`%s`' % name, '%s=-1' % name)):
    CoreRunConfig(**{name: -1})


@pytest.mark.parametrize('name', ['save_summary_steps', 'save_checkpoints_steps',
                                  'keep_checkpoint_max'])
def test_zero_allowed_where_it_means_off(name):
  assert getattr(CoreRunConfig(**{name: 0}), name) == 0


@pytest.mark.parametrize('name', ['log_step_count_steps', 'keep_checkpoint_every_n_hours',
                                  'session_creation_timeout_secs'])
def test_zero_rejected_where_it_must_be_positive(name):
  """The original required these to be > 0 (0 hours would keep every checkpoint forever, a
  0-second session timeout can never succeed)."""
  with pytest.raises(ValueError, match=_match(name, '%s=0' % name)):
    CoreRunConfig(**{name: 0})


@pytest.mark.parametrize('name,value', [
    ('session_config', {'allow_soft_placement': True}),
    ('tf_random_seed', '42'),
    ('tf_random_seed', 4.2),
    ('device_fn', '/cpu:0'),
])
def test_wrong_types_rejected(name, value):
  with pytest.raises(TypeError, match=_match('`%s`' % name, '%s=%r' % (name, value))):
    CoreRunConfig(**{name: value})


def test_device_fn_must_take_exactly_op():
  """The original required `device_fn(op)`; a wrong signature failed at construction."""
  with pytest.raises(ValueError, match='device_fn'):
    CoreRunConfig(device_fn=lambda op, extra: '/cpu:0')


def test_valid_values_kept():
  session_config = v1.ConfigProto(allow_soft_placement=True)
  device_fn = lambda op: '/cpu:0'  # pylint: disable=unnecessary-lambda-assignment
  config = CoreRunConfig(session_config=session_config, tf_random_seed=7, device_fn=device_fn,
                         keep_checkpoint_max=2, log_step_count_steps=None)
  assert config.session_config is session_config
  assert config.tf_random_seed == 7
  assert config.device_fn is device_fn
  assert config.keep_checkpoint_max == 2
  assert config.log_step_count_steps is None  # None turns step logging off


def test_model_dir_empty_rejected_and_path_converted(tmp_path):
  with pytest.raises(ValueError, match=_match('model_dir', "model_dir=''")):
    CoreRunConfig(model_dir='')
  assert CoreRunConfig(model_dir=pathlib.Path(tmp_path)).model_dir == str(tmp_path)


# --------------------------------------------------------------------------------------------
# RunConfig.replace


def test_replace_allowed_fields_returns_new_config():
  config = CoreRunConfig(save_summary_steps=10)
  new = config.replace(model_dir='/some/dir', tf_random_seed=3, keep_checkpoint_max=9,
                       save_summary_steps=0)
  assert (new.model_dir, new.tf_random_seed, new.keep_checkpoint_max, new.save_summary_steps) \
      == ('/some/dir', 3, 9, 0)
  assert (config.model_dir, config.tf_random_seed, config.keep_checkpoint_max,
          config.save_summary_steps) == (None, None, 5, 10)
  assert type(new) is CoreRunConfig


@pytest.mark.parametrize('name', ['tpu_config', 'master', 'not_a_field'])
def test_replace_disallowed_field(name):
  with pytest.raises(ValueError, match=_match('Replacing %s is not supported' % name,
                                              '%s=1' % name, 'Allowed properties',
                                              'save_checkpoints_steps', 'model_dir')):
    CoreRunConfig().replace(**{name: 1})


def test_replace_save_checkpoints_steps_clears_secs():
  config = CoreRunConfig()
  by_steps = config.replace(save_checkpoints_steps=20)
  assert (by_steps.save_checkpoints_steps, by_steps.save_checkpoints_secs) == (20, None)
  assert config.save_checkpoints_secs == 600
  by_secs = by_steps.replace(save_checkpoints_secs=45)
  assert (by_secs.save_checkpoints_steps, by_secs.save_checkpoints_secs) == (None, 45)


def test_replace_revalidates():
  with pytest.raises(ValueError, match=_match('save_checkpoints_steps=1',
                                              'save_checkpoints_secs=2')):
    CoreRunConfig().replace(save_checkpoints_steps=1, save_checkpoints_secs=2)
  with pytest.raises(ValueError, match=_match('keep_checkpoint_max', 'keep_checkpoint_max=-3')):
    CoreRunConfig().replace(keep_checkpoint_max=-3)
  with pytest.raises(TypeError, match=_match('session_config', "session_config='x'")):
    CoreRunConfig().replace(session_config='x')


# --------------------------------------------------------------------------------------------
# TF_CONFIG


def test_tf_config_chief(monkeypatch):
  _set_tf_config(monkeypatch, 'chief', 0)
  config = CoreRunConfig()
  assert (config.task_type, config.task_id, config.is_chief) == ('chief', 0, True)
  assert config.num_worker_replicas == 3  # chief + 2 workers
  assert config.num_ps_replicas == 1
  assert config.master == 'grpc://host0:2222'
  assert config.global_id_in_cluster == 0
  assert config.cluster_spec.as_dict() == CLUSTER


def test_tf_config_worker(monkeypatch):
  _set_tf_config(monkeypatch, 'worker', 1)
  config = CoreRunConfig()
  assert (config.task_type, config.task_id, config.is_chief) == ('worker', 1, False)
  assert config.num_worker_replicas == 3
  assert config.master == 'grpc://host2:2222'
  assert config.global_id_in_cluster == 2


def test_tf_config_evaluator(monkeypatch):
  _set_tf_config(monkeypatch, 'evaluator', 0)
  config = CoreRunConfig()
  assert (config.task_type, config.task_id, config.is_chief) == ('evaluator', 0, False)
  assert config.num_worker_replicas == 0 and config.num_ps_replicas == 0  # not in training
  assert config.master == ''


def test_tf_config_read_by_tpu_run_config(monkeypatch):
  _set_tf_config(monkeypatch, 'worker', 0)
  config = te.RunConfig()
  assert (config.task_type, config.is_chief) == ('worker', False)
  assert config.master == config.evaluation_master == 'grpc://host1:2222'


@pytest.mark.parametrize('task_type,index,is_chief', [
    ('master', 0, True), ('worker', 0, False), ('worker', 1, False), ('ps', 0, False)])
def test_tf_config_with_a_master_makes_it_the_only_chief(monkeypatch, task_type, index,
                                                          is_chief):
  """Cloud ML Engine's clusters (master, workers, ps): the master is the chief, as in the
  original; worker 0 is a chief only in a cluster of workers alone."""
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'master': ['m:1'], 'worker': ['w:1', 'w:2'], 'ps': ['p:1']},
      'task': {'type': task_type, 'index': index}}))
  config = CoreRunConfig()
  assert config.is_chief is is_chief
  assert config.num_worker_replicas == 3


def test_tf_config_invalid_json(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', '{"cluster": ')
  with pytest.raises(ValueError, match=_match('TF_CONFIG', 'JSON', 'TF_CONFIG=\'{"cluster": \'')):
    CoreRunConfig()


@pytest.mark.parametrize('task_type,index', [('worker', 2), ('master', 0)])
def test_tf_config_task_not_in_cluster(monkeypatch, task_type, index):
  _set_tf_config(monkeypatch, task_type, index)
  with pytest.raises(ValueError, match=_match('not in its cluster', "'type': %r" % task_type,
                                              "'index': %d" % index)):
    CoreRunConfig()


def test_tf_config_cluster_without_task_type(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': CLUSTER}))
  with pytest.raises(ValueError, match=_match('task type', 'task={}')):
    CoreRunConfig()


def test_tf_config_model_dir_used(monkeypatch, tmp_path):
  """The original took `model_dir` from TF_CONFIG when the constructor had none."""
  _set_tf_config(monkeypatch, 'chief', 0, model_dir=str(tmp_path))
  assert CoreRunConfig().model_dir == str(tmp_path)


def test_parse_tf_config_dict_string_and_empty():
  tf_config = {'cluster': CLUSTER, 'task': {'type': 'worker', 'index': 0}}
  for value in (tf_config, json.dumps(tf_config)):
    info = te.parse_tf_config(value)
    assert (info.task_type, info.task_id, info.is_chief) == ('worker', 0, False)
    assert (info.num_worker_replicas, info.num_ps_replicas) == (3, 1)
    assert info.master == 'grpc://host1:2222'
  local = te.parse_tf_config({})
  assert (local.task_type, local.task_id, local.is_chief, local.master) == ('worker', 0, True, '')
  assert local.num_worker_replicas == 1


# --------------------------------------------------------------------------------------------
# TPUConfig


def test_input_pipeline_config_values():
  assert (IPC.PER_SHARD_V1, IPC.PER_HOST_V1, IPC.PER_HOST_V2, IPC.BROADCAST, IPC.SLICED) == \
      (1, 2, 3, 4, 5)


def test_tpu_config_defaults():
  config = te.TPUConfig()
  assert config.iterations_per_loop == 2
  assert config.num_shards is None
  assert config.num_cores_per_replica is None
  assert config.experimental_host_call_every_n_steps == 1
  assert config.eval_training_input_configuration == IPC.PER_HOST_V1


@pytest.mark.parametrize('value,parsed', [
    (1, ('count', 1)), (100, ('count', 100)), ('30s', ('seconds', 30)), ('5m', ('seconds', 300)),
    ('1h', ('seconds', 3600))])
def test_iterations_per_loop_accepted(value, parsed):
  assert te.TPUConfig(iterations_per_loop=value).iterations_per_loop == value
  assert config_lib.parse_iterations_per_loop(value) == parsed


@pytest.mark.parametrize('value,error', [
    (0, ValueError), (-1, ValueError), ('abc', ValueError), ('10x', ValueError),
    ('0s', ValueError), (None, ValueError), (True, TypeError)])
def test_iterations_per_loop_rejected(value, error):
  with pytest.raises(error, match=_match('iterations_per_loop',
                                         'iterations_per_loop=%r' % (value,))):
    te.TPUConfig(iterations_per_loop=value)


@pytest.mark.parametrize('value,error', [
    (0, ValueError), (-2, ValueError), (2.0, TypeError), ('4', TypeError), (True, TypeError)])
def test_num_shards_rejected(value, error):
  with pytest.raises(error, match=_match('num_shards', 'num_shards=%r' % (value,))):
    te.TPUConfig(num_shards=value)


def test_num_shards_accepted():
  assert te.TPUConfig(num_shards=8).num_shards == 8
  assert te.TPUConfig(num_shards=None).num_shards is None


def test_num_shards_numpy_int_accepted():
  """The original accepted numpy integers for num_shards (and the batch sizes)."""
  assert te.TPUConfig(num_shards=np.int32(2)).num_shards == 2


def test_model_parallelism_settings_checked_as_the_original():
  """num_cores_per_replica and input_partition_dims are taken where the original took them
  (a program's TPU layout; off a TPU each replica runs whole on one device) and refused where
  it refused them."""
  assert te.TPUConfig(num_cores_per_replica=1).num_cores_per_replica == 1
  assert te.TPUConfig(num_cores_per_replica=128).num_cores_per_replica == 128
  dims = [[1, 2, 1, 1], [1, 2, 1]]
  config = te.TPUConfig(num_cores_per_replica=4, input_partition_dims=dims,
                        per_host_input_for_training=IPC.PER_HOST_V2)
  assert config.input_partition_dims == dims
  with pytest.raises(ValueError, match=_match('num_cores_per_replica',
                                              'num_cores_per_replica=3')):
    te.TPUConfig(num_cores_per_replica=3)
  with pytest.raises(ValueError, match='only supported with PER_HOST_V2'):
    te.TPUConfig(num_cores_per_replica=4, input_partition_dims=dims)
  with pytest.raises(ValueError, match='requires `num_cores_per_replica`'):
    te.TPUConfig(input_partition_dims=dims, per_host_input_for_training=IPC.PER_HOST_V2)
  with pytest.raises(ValueError, match='one or two elements'):
    te.TPUConfig(num_cores_per_replica=4, input_partition_dims=[[1], [1], [1]],
                 per_host_input_for_training=IPC.PER_HOST_V2)


@pytest.mark.parametrize('value,mode', [
    (True, IPC.PER_HOST_V1), (False, IPC.PER_SHARD_V1), (IPC.PER_SHARD_V1, IPC.PER_SHARD_V1),
    (IPC.PER_HOST_V1, IPC.PER_HOST_V1), (IPC.PER_HOST_V2, IPC.PER_HOST_V2),
    (IPC.BROADCAST, IPC.BROADCAST)])
def test_per_host_input_for_training_accepted(value, mode):
  assert te.TPUConfig(per_host_input_for_training=value).input_mode == mode


@pytest.mark.parametrize('value,mode', [(True, IPC.PER_HOST_V1), (False, IPC.PER_SHARD_V1)])
def test_per_host_input_for_training_bool_normalised(value, mode):
  """The original stored True/False as PER_HOST_V1/PER_SHARD_V1 in the TPUConfig."""
  assert te.TPUConfig(per_host_input_for_training=value).per_host_input_for_training == mode


@pytest.mark.parametrize('value', [0, 5, 'per_host', None])
def test_per_host_input_for_training_rejected(value):
  with pytest.raises(ValueError, match=_match('per_host_input_for_training',
                                              'per_host_input_for_training=%r' % (value,))):
    te.TPUConfig(per_host_input_for_training=value)


def test_experimental_host_call_every_n_steps():
  assert te.TPUConfig(experimental_host_call_every_n_steps=5) \
      .experimental_host_call_every_n_steps == 5
  name = 'experimental_host_call_every_n_steps'
  for value, error in ((0, ValueError), (-1, ValueError), (2.5, TypeError)):
    with pytest.raises(error, match=_match(name, '%s=%r' % (name, value))):
      te.TPUConfig(experimental_host_call_every_n_steps=value)


# --------------------------------------------------------------------------------------------
# The TPU RunConfig (tpu_estimator.RunConfig)


def test_tpu_run_config_fields():
  tpu_config = te.TPUConfig(iterations_per_loop=7, num_shards=2)
  config = te.RunConfig(tpu_config=tpu_config, master='grpc://m:1', save_summary_steps=3)
  assert config.tpu_config is tpu_config
  assert config.master == 'grpc://m:1'
  assert config.evaluation_master == 'grpc://m:1'  # defaults to master
  assert config.save_summary_steps == 3
  assert isinstance(config, CoreRunConfig)
  config = te.RunConfig(master='grpc://m:1', evaluation_master='grpc://e:2')
  assert (config.master, config.evaluation_master) == ('grpc://m:1', 'grpc://e:2')
  assert te.RunConfig().tpu_config == te.TPUConfig()


def test_tpu_run_config_rejects_wrong_tpu_config_type():
  with pytest.raises(TypeError, match=_match('`tpu_config`', 'TPUConfig',
                                             "tpu_config={'iterations_per_loop': 4}")):
    te.RunConfig(tpu_config={'iterations_per_loop': 4})


def test_tpu_run_config_cluster_and_master_together():
  resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec({'worker': ['w0:8470']}), master='grpc://w0:8470')
  with pytest.raises(ValueError, match=_match('cluster', 'master', "master='grpc://other:1'")):
    te.RunConfig(cluster=resolver, master='grpc://other:1')


def test_tpu_run_config_master_from_cluster_resolver():
  """The original read `master` (and the cluster spec) from the ClusterResolver."""
  resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec({'worker': ['w0:8470']}), master='grpc://w0:8470')
  config = te.RunConfig(cluster=resolver)
  assert config.cluster is resolver
  assert config.master == 'grpc://w0:8470'


def test_tpu_run_config_replace_keeps_tpu_fields():
  tpu_config = te.TPUConfig(iterations_per_loop=7)
  config = te.RunConfig(tpu_config=tpu_config, master='grpc://m:1')
  new = config.replace(save_summary_steps=11, model_dir='/some/dir')
  assert type(new) is te.RunConfig
  assert new.tpu_config is tpu_config
  assert new.master == 'grpc://m:1'
  assert (new.save_summary_steps, new.model_dir) == (11, '/some/dir')
  swapped = config.replace(tpu_config=te.TPUConfig(iterations_per_loop=9))
  assert swapped.tpu_config.iterations_per_loop == 9
  assert config.tpu_config.iterations_per_loop == 7
  with pytest.raises(TypeError, match=_match('`tpu_config`', 'tpu_config=3')):
    config.replace(tpu_config=3)


# --------------------------------------------------------------------------------------------
# Estimator / TPUEstimator constructors


def _model_fn(features, labels, mode, params):
  raise AssertionError('constructors must not call model_fn')


def _model_fn_without_params(features, labels, mode):
  raise AssertionError('constructors must not call model_fn')


def _tpu_estimator(model_fn=_model_fn, config=None, **kwargs):
  kwargs.setdefault('train_batch_size', 8)
  return te.TPUEstimator(model_fn, config=config or te.RunConfig(), **kwargs)


@pytest.fixture(params=['Estimator', 'TPUEstimator'])
def make(request):
  """Builds an Estimator or a TPUEstimator from a model_fn (and params)."""
  if request.param == 'Estimator':
    return te.Estimator
  return _tpu_estimator


def test_model_fn_none(make):
  with pytest.raises(ValueError, match=_match('model_fn', 'model_fn=None')):
    make(None)


def test_model_fn_not_callable(make):
  with pytest.raises(TypeError, match=_match('`model_fn` must be callable', "model_fn='fn'")):
    make('fn')


def test_model_fn_without_features(make):
  def model_fn(inputs, labels, mode, params):
    del inputs, labels, mode, params

  with pytest.raises(ValueError, match=_match('features', "model_fn_args=['inputs'")):
    make(model_fn)


def test_model_fn_with_unexpected_args(make):
  def model_fn(features, labels, mode, params, learning_rate):
    del features, labels, mode, params, learning_rate

  with pytest.raises(ValueError, match=_match("['learning_rate']", 'model_fn_args=')):
    make(model_fn)


def test_params_passed_but_model_fn_lacks_params():
  with pytest.raises(ValueError, match=_match('params', "params={'lr': 0.1}")):
    te.Estimator(_model_fn_without_params, params={'lr': 0.1})


def test_tpu_estimator_params_must_be_a_dict():
  """TPUEstimator writes params['batch_size'] into a dict, or into an HParams with set_hparam
  (tests/test_tpu_estimator.py); the plain Estimator passes any params object through, as the
  original did (tests/test_estimator.py)."""
  with pytest.raises(TypeError, match=_match('`params` must be a dict', "params=[('lr', 0.1)]")):
    _tpu_estimator(params=[('lr', 0.1)])


def test_accepted_model_fn_signatures(tmp_path):
  def features_only(features):
    del features

  def with_config(features, labels, mode, config):
    del features, labels, mode, config

  bound = functools.partial(lambda features, labels, extra: None, extra=1)
  for model_fn in (features_only, with_config, bound, _model_fn_without_params):
    te.Estimator(model_fn, model_dir=str(tmp_path))  # accepted: no error


def test_estimator_config_must_be_a_run_config():
  with pytest.raises(TypeError, match=_match('`config`', "config='local'")):
    te.Estimator(_model_fn, config='local')


@pytest.mark.parametrize('config', [None, 'core'])
def test_tpu_estimator_requires_tpu_run_config(config):
  if config == 'core':
    config = CoreRunConfig()
  with pytest.raises(TypeError, match=_match('`config`', 'tpu_estimator.RunConfig', 'config=')):
    te.TPUEstimator(_model_fn, config=config, train_batch_size=8)


@pytest.mark.parametrize('key', ['batch_size', 'context'])
def test_tpu_estimator_reserved_params_keys(key):
  with pytest.raises(ValueError, match=_match(repr(key), 'reserved', 'params={%r: 4}' % key)):
    _tpu_estimator(params={key: 4})


def test_tpu_estimator_model_fn_must_take_params():
  with pytest.raises(ValueError, match=_match('params', "model_fn_args=['features', 'labels', "
                                              "'mode']")):
    _tpu_estimator(_model_fn_without_params)


def test_tpu_estimator_train_batch_size_required_with_use_tpu(tmp_path):
  with pytest.raises(ValueError, match=_match('train_batch_size', 'train_batch_size=None',
                                              'use_tpu=True')):
    te.TPUEstimator(_model_fn, config=te.RunConfig(), use_tpu=True)
  est = te.TPUEstimator(_model_fn, config=te.RunConfig(model_dir=str(tmp_path)), use_tpu=False)
  assert est.model_dir == str(tmp_path)


@pytest.mark.parametrize('value,error', [
    (0, ValueError), (-4, ValueError), (8.0, TypeError), ('8', TypeError), (True, TypeError)])
def test_tpu_estimator_train_batch_size_must_be_positive_int(value, error):
  with pytest.raises(error, match=_match('train_batch_size', 'train_batch_size=%r' % (value,))):
    _tpu_estimator(train_batch_size=value)


@pytest.mark.parametrize('name', ['eval_batch_size', 'predict_batch_size'])
@pytest.mark.parametrize('value,error', [(0, ValueError), (-1, ValueError), (2.5, TypeError)])
def test_tpu_estimator_eval_predict_batch_sizes(name, value, error):
  with pytest.raises(error, match=_match(name, '%s=%r' % (name, value))):
    _tpu_estimator(**{name: value})


def test_tpu_estimator_numpy_int_batch_size_accepted(tmp_path):
  """The original accepted numpy integers (e.g. computed batch sizes)."""
  _tpu_estimator(config=te.RunConfig(model_dir=str(tmp_path)), train_batch_size=np.int64(16))


@pytest.mark.parametrize('value', [0, 3, '1'])
def test_tpu_estimator_export_api_version_rejected(value):
  name = 'export_saved_model_api_version'
  with pytest.raises(ValueError, match=_match(name, '%s=%r' % (name, value))):
    _tpu_estimator(export_saved_model_api_version=value)


@pytest.mark.parametrize('value', [1, 2, te.ExportSavedModelApiVersion.V1,
                                   te.ExportSavedModelApiVersion.V2])
def test_tpu_estimator_export_api_version_accepted(tmp_path, value):
  _tpu_estimator(config=te.RunConfig(model_dir=str(tmp_path)),
                 export_saved_model_api_version=value)


def test_tpu_estimator_embedding_config_spec_must_be_a_spec():
  with pytest.raises(TypeError, match=_match('EmbeddingConfigSpec',
                                             "embedding_config_spec='tables'")):
    _tpu_estimator(embedding_config_spec='tables')


def test_tpu_estimator_keeps_tpu_config(tmp_path):
  tpu_config = te.TPUConfig(iterations_per_loop=5, num_shards=2)
  est = _tpu_estimator(config=te.RunConfig(tpu_config=tpu_config, model_dir=str(tmp_path)))
  assert type(est.config) is te.RunConfig
  assert est.config.tpu_config == tpu_config
  assert est.model_dir == str(tmp_path)


def test_model_dir_conflict_with_config(make, tmp_path):
  config_dir, ctor_dir = str(tmp_path / 'config'), str(tmp_path / 'ctor')
  with pytest.raises(ValueError, match=_match('model_dir', 'model_dir=%r' % ctor_dir,
                                              'config_model_dir=%r' % config_dir)):
    make(_model_fn, model_dir=ctor_dir, config=te.RunConfig(model_dir=config_dir))


def test_model_dir_from_either_place(make, tmp_path):
  same = str(tmp_path / 'same')
  assert make(_model_fn, model_dir=same, config=te.RunConfig(model_dir=same)).model_dir == same
  from_config = make(_model_fn, config=te.RunConfig(model_dir=same))
  assert from_config.model_dir == same
  ctor = str(tmp_path / 'ctor')
  from_ctor = make(_model_fn, model_dir=ctor, config=te.RunConfig())
  assert from_ctor.model_dir == ctor
  assert from_ctor.config.model_dir == ctor  # written back into the config


def test_temp_model_dir_when_none_given(make, tmp_path):
  est = make(_model_fn, config=te.RunConfig())
  assert est.model_dir and os.path.isdir(est.model_dir)
  assert os.path.dirname(est.model_dir) == str(tmp_path)  # made with tempfile.mkdtemp()
  assert est.config.model_dir == est.model_dir
  other = make(_model_fn, config=te.RunConfig())
  assert other.model_dir != est.model_dir


def test_config_property_returns_a_copy(tmp_path):
  config = te.RunConfig(model_dir=str(tmp_path), session_config=v1.ConfigProto())
  est = te.Estimator(_model_fn, config=config)
  first = est.config
  assert first is not est.config
  first.session_config.allow_soft_placement = True
  assert est.config.session_config.allow_soft_placement is False
  assert est.config.model_dir == str(tmp_path)


def test_params_property_returns_a_copy(make, tmp_path):
  params = {'layers': [8, 4], 'lr': 0.1}
  est = make(_model_fn, params=params, config=te.RunConfig(model_dir=str(tmp_path)))
  params['layers'].append(2)  # the caller's dict changing later does not leak in
  got = est.params
  assert got == {'layers': [8, 4], 'lr': 0.1}
  got['layers'].append(1)
  got['new'] = 1
  assert est.params == {'layers': [8, 4], 'lr': 0.1}

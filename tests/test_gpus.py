"""GPU configuration that can be checked on any machine: memory growth by default, logical GPUs
when num_shards exceeds the cards, input prefetched to a device, the demo's default shards.
(The same paths run for real on a GPU machine: the whole suite passes there unchanged.)"""
import os

import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator as te
from tpu_estimator.distribute import gpus
from tpu_estimator.distribute import host_input
from tpu_estimator.distribute import replication
from tpu_estimator.tools import demo

_v1 = tf.compat.v1


@pytest.fixture
def no_growth_variable(monkeypatch):
  monkeypatch.delenv(gpus.GROWTH_VARIABLE, raising=False)


def test_memory_grows_unless_the_user_configured_it(no_growth_variable):
  assert gpus.grow_memory_unless_configured(None)
  assert os.environ[gpus.GROWTH_VARIABLE] == 'true'


def test_user_gpu_options_are_left_alone(no_growth_variable):
  config = _v1.ConfigProto()
  config.gpu_options.per_process_gpu_memory_fraction = 0.9
  assert not gpus.grow_memory_unless_configured(config)
  assert gpus.GROWTH_VARIABLE not in os.environ


def test_user_environment_setting_wins(monkeypatch):
  monkeypatch.setenv(gpus.GROWTH_VARIABLE, 'false')
  assert not gpus.grow_memory_unless_configured(None)
  assert os.environ[gpus.GROWTH_VARIABLE] == 'false'


def test_an_estimator_sets_growth_before_any_session(no_growth_variable, tmp_path):
  te.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path))
  assert os.environ[gpus.GROWTH_VARIABLE] == 'true'


@pytest.mark.parametrize('logical, physical, expected', [
    (2, 1, [2]), (4, 1, [4]), (3, 2, [2, 1]), (5, 2, [3, 2]), (4, 4, [1, 1, 1, 1])])
def test_split_spreads_logical_gpus_over_cards(logical, physical, expected):
  assert gpus.split(logical, physical) == expected
  assert sum(expected) == logical


def test_logical_gpus_share_each_card_memory(monkeypatch):
  monkeypatch.setattr(gpus, '_card_memory_mb', lambda: 8000)
  config = gpus.add_logical_gpus(_v1.ConfigProto(), [3, 1])
  virtual = config.gpu_options.experimental.virtual_devices
  assert [list(v.memory_limit_mb) for v in virtual] == [[2666.0] * 3, [8000.0]]


def test_card_memory_falls_back_without_a_driver():
  # On a machine without NVIDIA's driver library the fallback size is used (never an error).
  size = gpus._card_memory_mb()  # pylint: disable=protected-access
  assert isinstance(size, int) and size > 0


@pytest.fixture
def fake_gpus(monkeypatch):
  """`fake_gpus(count)` pretends the machine has `count` GPUs.  The test runs in a graph, as the
  estimator builds its replicas (an eager strategy would place variables on the GPUs at once)."""

  def pretend(count):
    devices = [tf.config.PhysicalDevice('/physical_device:GPU:%d' % i, 'GPU')
               for i in range(count)]
    monkeypatch.setattr(replication, 'physical_gpus', lambda: devices)
    monkeypatch.setattr(gpus, '_card_memory_mb', lambda: 16000)

  with tf.Graph().as_default():
    yield pretend


def test_more_shards_than_gpus_become_logical_gpus(fake_gpus, caplog):
  fake_gpus(1)
  replication._SPLITS_LOGGED.clear()  # pylint: disable=protected-access
  replicas = replication.make_replicas(4)
  assert replicas.kind == 'gpu' and replicas.logical_gpus == [4]
  assert replicas.devices == ('/gpu:0', '/gpu:1', '/gpu:2', '/gpu:3')
  assert isinstance(replicas.strategy.extended._cross_device_ops,  # pylint: disable=protected-access
                    tf.distribute.ReductionToOneDevice)
  config = replicas.session_config()
  virtual = config.gpu_options.experimental.virtual_devices
  assert [list(v.memory_limit_mb) for v in virtual] == [[4000.0] * 4]
  assert config.allow_soft_placement
  assert 'not faster' in caplog.text and 'logical GPUs' in caplog.text


def test_all_gpus_by_default_and_no_split_when_they_suffice(fake_gpus):
  fake_gpus(2)
  replicas = replication.make_replicas(None)
  assert replicas.devices == ('/gpu:0', '/gpu:1') and not replicas.logical_gpus
  assert not replicas.session_config().gpu_options.experimental.virtual_devices
  assert replication.make_replicas(1).devices == ('/gpu:0',)


def test_user_session_config_is_kept_and_extended(fake_gpus):
  fake_gpus(1)
  base = _v1.ConfigProto(log_device_placement=True)
  config = replication.make_replicas(2).session_config(base)
  assert config.log_device_placement
  assert len(config.gpu_options.experimental.virtual_devices[0].memory_limit_mb) == 2


def test_inference_on_gpus_keeps_graph_rewrites(fake_gpus):
  """Only evaluation/prediction loops on CPU go without Grappler (measured there); on GPUs
  its layout and fusion rewrites stay."""
  fake_gpus(2)
  for replicas in (replication.single_device(), replication.make_replicas(2)):
    config = replicas.session_config(rewrites=False)
    assert not config.graph_options.rewrite_options.disable_meta_optimizer


def test_one_device_is_the_gpu_where_there_is_one(fake_gpus):
  assert replication.single_device().on_cpu == (not tf.config.list_physical_devices('GPU'))
  fake_gpus(1)
  single = replication.single_device()
  assert single.on_gpu and not single.on_cpu and single.strategy is None


def _read_all(iterator, session):
  values = []
  next_value = iterator.get_next()
  with pytest.raises(tf.errors.OutOfRangeError):
    while True:
      values.append(session.run(next_value))
  return values


def test_input_prefetched_to_a_device_reads_the_same_elements():
  with tf.Graph().as_default():
    data = np.arange(24, dtype=np.float32).reshape(12, 2)
    dataset = tf.data.Dataset.from_tensor_slices(({'x': data}, np.arange(12))).batch(5)
    host = host_input._iterator(dataset, None)  # pylint: disable=protected-access
    device = host_input._iterator(dataset, '/cpu:0')  # pylint: disable=protected-access
    with _v1.Session() as session:
      session.run([host.initializer, device.initializer])
      a, b = _read_all(host, session), _read_all(device, session)
  assert len(a) == len(b) == 3
  for (fa, la), (fb, lb) in zip(a, b):
    np.testing.assert_array_equal(fa['x'], fb['x'])
    np.testing.assert_array_equal(la, lb)


def test_string_inputs_stay_on_the_host():
  spec = (tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.float32))
  assert not host_input._device_friendly(spec)  # pylint: disable=protected-access
  assert host_input._device_friendly({'x': tf.TensorSpec([None, 3], tf.float32),  # pylint: disable=protected-access
                                  'ids': tf.TensorSpec([None], tf.int64)})


def test_demo_defaults_to_every_gpu_or_two_cpu_shards(monkeypatch):
  gpus_here = len(tf.config.list_physical_devices('GPU'))
  assert demo.default_shards() == (gpus_here or demo.CPU_SHARDS)
  monkeypatch.setattr(tf.config, 'list_physical_devices', lambda kind=None: ['g'] * 3)
  assert demo.default_shards() == 3

"""tf.contrib.training: HParams typed parsing and round trips as TF 1.15 documented, and the
checkpoint-polling helpers."""
import os

import pytest
import tensorflow as tf

from tpu_estimator.compat.contrib import training


def _hparams():
  return training.HParams(learning_rate=0.1, layers=3, use_bias=True, name='bert',
                          sizes=[64, 32])


def test_values_attributes_and_contains():
  hp = _hparams()
  assert hp.learning_rate == 0.1 and hp.sizes == [64, 32]
  assert hp.values() == {'learning_rate': 0.1, 'layers': 3, 'use_bias': True,
                         'name': 'bert', 'sizes': [64, 32]}
  assert 'layers' in hp and 'depth' not in hp
  assert hp.get('layers', 7) == 3 and hp.get('depth', 7) == 7
  with pytest.raises(ValueError):
    hp.get('layers', 'seven')  # a default of the wrong type


def test_parse_converts_to_each_hyperparameter_type():
  hp = _hparams().parse('learning_rate=1,layers=12,use_bias=false,name=albert,'
                        'sizes=[128,64,32]')
  assert hp.values() == {'learning_rate': 1.0, 'layers': 12, 'use_bias': False,
                         'name': 'albert', 'sizes': [128, 64, 32]}
  assert isinstance(hp.learning_rate, float)
  assert _hparams().parse('sizes[1]=5').sizes == [64, 5]
  assert _hparams().parse('use_bias=0').use_bias is False
  assert _hparams().parse('').values() == _hparams().values()


@pytest.mark.parametrize('bad', ['layers=1.5', 'learning_rate=fast', 'depth=2', 'layers=[1,2]',
                                 'sizes=3', 'use_bias=maybe', 'layers=1,layers=2',
                                 'layers'])
def test_parse_rejects_with_value_error(bad):
  with pytest.raises(ValueError):
    _hparams().parse(bad)


def test_set_hparam_type_rules_and_add_del():
  hp = _hparams()
  hp.set_hparam('learning_rate', 2)  # int -> float is allowed
  assert hp.learning_rate == 2.0 and isinstance(hp.learning_rate, float)
  for name, value in (('layers', 2.5), ('use_bias', 1), ('name', 3),
                      ('sizes', 4), ('layers', [1])):
    with pytest.raises(ValueError):
      hp.set_hparam(name, value)
  with pytest.raises(KeyError):
    hp.set_hparam('depth', 1)
  hp.add_hparam('depth', 4)
  assert hp.depth == 4
  with pytest.raises(ValueError):
    hp.add_hparam('depth', 5)
  with pytest.raises(ValueError):
    hp.add_hparam('values', 1)  # a method name is reserved
  with pytest.raises(ValueError):
    hp.add_hparam('empty', [])
  hp.del_hparam('depth')
  assert 'depth' not in hp and not hasattr(hp, 'depth')


def test_json_round_trip_and_override_from_dict():
  hp = _hparams()
  text = hp.to_json(sort_keys=True)
  other = training.HParams(learning_rate=0.0, layers=0, use_bias=False, name='',
                           sizes=[0]).parse_json(text)
  assert other.values() == hp.values()
  assert hp.override_from_dict({'layers': 24}).layers == 24
  assert repr(hp).startswith('HParams([(') and "('layers', 24)" in str(hp)


def test_checkpoints_iterator_yields_new_checkpoints(tmp_path):
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(step.initializer)
      saver.save(session, os.path.join(str(tmp_path), 'model.ckpt'), global_step=3)
  found = list(training.checkpoints_iterator(str(tmp_path), timeout=0.1))
  assert found == [os.path.join(str(tmp_path), 'model.ckpt-3')]
  assert training.wait_for_new_checkpoint(str(tmp_path), timeout=0.1) == found[0]

"""Run by tests/test_doctor.py in a fresh process (the doctor calls compat.install(), which
changes TensorFlow's modules for the whole process):

    python doctor_probe.py OUT_JSON WORK_DIR PROGRAM...

Writes into WORK_DIR two programs made from the runtime's own tables: `tables_program.py`
(one statement per line: every name of every estimator namespace, every tf.contrib module and
the names of the provided ones, the "not provided" hints) and `tf1_program.py` (TF1-only names
on `tensorflow`).  Then runs `tpu-estimator doctor --json` (cli.main, in this process) on each
PROGRAM and on those two, `doctor` without --json on the first PROGRAM, and finally executes,
after the install() the doctor did, the source line of every name of the table programs and
records whether it ran or what it raised: the test checks that what the doctor calls covered
runs and what it calls not provided raises.
"""
import contextlib
import io
import json
import os
import sys

import tensorflow as tf  # pylint: disable=unused-import

from tpu_estimator import canned
from tpu_estimator.compat import contrib
from tpu_estimator.compat import namespaces
from tpu_estimator.tools import cli


def tables_program():
  lines = ['import tensorflow as tf', 'import tensorflow.compat.v1 as tf1']
  for ns, names in (('tf.estimator', namespaces.ESTIMATOR_NAMES + canned.V2_NAMES),
                    ('tf1.estimator', namespaces.ESTIMATOR_NAMES),
                    ('tf.estimator.export', namespaces.EXPORT_NAMES),
                    ('tf.estimator.experimental', namespaces.EXPERIMENTAL_NAMES),
                    ('tf1.estimator.inputs', namespaces.INPUTS_NAMES),
                    ('tf1.estimator.tpu', namespaces.TPU_NAMES),
                    ('tf.contrib.tpu', contrib.TPU_NAMES),
                    ('tf.estimator', tuple(namespaces._MISSING_HINTS)),  # pylint: disable=protected-access
                    ('tf.contrib', tuple(contrib.REPLACEMENTS))):
    lines.extend('x = %s.%s' % (ns, name) for name in names)
  for name in contrib.IMPLEMENTED:
    impl = __import__('tpu_estimator.compat.contrib.' + name, fromlist=['_'])
    lines.extend('x = tf.contrib.%s.%s' % (name, n) for n in impl.__all__)
  for module, ns in sorted(namespaces.build().items()):
    if module.startswith('_'):
      continue
    lines.extend('from %s import %s' % (module, n) for n in sorted(vars(ns))
                 if not n.startswith('_'))
  return '\n'.join(lines) + '\n'


TF1_PROGRAM = '''import tensorflow as tf
import tensorflow.compat.v1 as tf1
x = tf.flags.FLAGS
x = tf.placeholder
x = tf.train.AdamOptimizer
x = tf.metrics.accuracy
x = tf.estimator.Estimator
x = tf.contrib.tpu.TPUEstimator
'''


def doctor(argv):
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    code = cli.main(['doctor'] + argv)
  return code, out.getvalue()


def main():
  out_json, work = sys.argv[1], sys.argv[2]
  programs = {os.path.join(work, 'tables_program.py'): tables_program(),
              os.path.join(work, 'tf1_program.py'): TF1_PROGRAM}
  for path, text in programs.items():
    with open(path, 'w') as f:
      f.write(text)
  result = {'json': {}, 'exit': {}}
  for program in sys.argv[3:] + list(programs):
    code, text = doctor(['--json', program])
    result['exit'][program] = code
    result['json'][program] = json.loads(text)
  result['human_exit'], result['human'] = doctor([sys.argv[3], '--some-flag=1'])
  # Execute each table line after the doctor's install(): what really happens under `run`.
  executed = {}
  for path in programs:
    source = programs[path].splitlines()
    scope = {}
    exec(source[0] + '\n' + source[1], scope)  # pylint: disable=exec-used
    for number, line in enumerate(source[2:], start=3):
      try:
        exec(line, scope)  # pylint: disable=exec-used
        executed['%s:%d' % (os.path.basename(path), number)] = 'ok'
      except Exception as e:  # pylint: disable=broad-except
        hint = None
        if isinstance(e, AttributeError):
          from tpu_estimator import compat  # pylint: disable=import-outside-toplevel
          hint = compat.tf1_hint(e)
        executed['%s:%d' % (os.path.basename(path), number)] = (
            'tf1' if hint else 'raised %s: %s' % (type(e).__name__, e))
  result['executed'] = executed
  with open(out_json, 'w') as f:
    json.dump(result, f)


if __name__ == '__main__':
  main()

"""`checkpoints.sigterm`, the process's one SIGTERM handler: a deferred SIGTERM goes on to the
previous handler when the block ends (exit 143 with the default one, a program's own handler
called), a cleanup runs before the signal goes on, blocks nest, handlers come back, and other
threads change nothing.  Each case runs in a child process, which the signal may end."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PRELUDE = '''
import os, signal, sys, threading
from tpu_estimator.checkpoints import sigterm
def say(*words):
  print(*words, flush=True)
def term():
  os.kill(os.getpid(), signal.SIGTERM)
'''

_CASES = {
    # The default handler: the process ends by SIGTERM once the block is done.
    'deferred_default': '''
        with sigterm.deferred('deferred') as flag:
          term()
          say('IN_BLOCK', flag.received)
        say('AFTER')
    ''',
    # A program's own handler is called once, after the block, and then it is back.
    'deferred_own_handler': '''
        signal.signal(signal.SIGTERM, lambda s, f: say('HANDLER', s))
        with sigterm.deferred() as flag:
          term()
          say('IN_BLOCK', flag.received)
        say('AFTER', signal.getsignal(signal.SIGTERM) is not sigterm._handle)
    ''',
    # A cleanup runs, then the signal goes on to the default handler at once.
    'cleanup_default': '''
        with sigterm.cleanup_on_sigterm(lambda: say('CLEANUP')):
          term()
          say('IN_BLOCK')
    ''',
    # A cleanup inside a deferral runs at once; the signal is delivered after the deferral.
    'cleanup_in_deferred': '''
        with sigterm.deferred() as flag:
          with sigterm.cleanup_on_sigterm(lambda: say('CLEANUP')):
            term()
            say('IN_CLEANUP_BLOCK', flag.received)
          say('IN_BLOCK')
        say('AFTER')
    ''',
    # Nested deferrals: the signal reaches the outer block when the inner one ends.
    'nested_deferred': '''
        with sigterm.deferred() as outer:
          with sigterm.deferred() as inner:
            term()
            say('INNER', inner.received, outer.received)
          say('OUTER', outer.received)
        say('AFTER')
    ''',
    # Without a signal, the previous handler is back after the blocks; a raising block drops
    # a received signal; another thread installs nothing and its flag stays False.
    'restored': '''
        own = lambda s, f: say('HANDLER')
        signal.signal(signal.SIGTERM, own)
        with sigterm.deferred(), sigterm.cleanup_on_sigterm(lambda: None):
          assert signal.getsignal(signal.SIGTERM) is sigterm._handle
        say('BACK', signal.getsignal(signal.SIGTERM) is own)
        try:
          with sigterm.deferred():
            term()
            raise KeyError
        except KeyError:
          pass
        say('DROPPED', signal.getsignal(signal.SIGTERM) is own)
        def other():
          with sigterm.deferred() as flag:
            say('THREAD', signal.getsignal(signal.SIGTERM) is own, flag.received)
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    ''',
}


def _run(case):
  env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='2')
  program = _PRELUDE + textwrap.dedent(_CASES[case])
  result = subprocess.run([sys.executable, '-c', program], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
  return result.returncode, result.stdout.split('\n')[:-1], result.stderr


@pytest.mark.parametrize('case, code, lines', [
    ('deferred_default', -signal.SIGTERM, ['IN_BLOCK True']),
    ('deferred_own_handler', 0, ['IN_BLOCK True', 'HANDLER 15', 'AFTER True']),
    ('cleanup_default', -signal.SIGTERM, ['CLEANUP']),
    ('cleanup_in_deferred', -signal.SIGTERM,
     ['CLEANUP', 'IN_CLEANUP_BLOCK True', 'IN_BLOCK']),
    ('nested_deferred', -signal.SIGTERM, ['INNER True False', 'OUTER True']),
    ('restored', 0, ['BACK True', 'DROPPED True', 'THREAD True False']),
])
def test_sigterm(case, code, lines):
  returncode, stdout, stderr = _run(case)
  assert (returncode, stdout) == (code, lines), stderr[-2000:]


def test_deferred_logs_its_message():
  returncode, _, stderr = _run('deferred_default')
  assert returncode == -signal.SIGTERM
  assert 'deferred' in stderr

"""A local multi-worker launcher for testing and development (not a cluster manager).

`launch(argv, num_workers)` starts `num_workers` copies of a Python program on this machine,
each with a `TF_CONFIG` naming a loopback port per task (task 0 is the `chief`, the others
`worker`s), waits for them, and if one fails stops the others.  Returns the exit codes.
"""
import json
import os
import socket
import subprocess
import sys
import time


def free_ports(count):
  """`count` distinct free TCP ports on 127.0.0.1."""
  sockets = []
  try:
    for _ in range(count):
      sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      sock.bind(('127.0.0.1', 0))
      sockets.append(sock)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for sock in sockets:
      sock.close()


def tf_configs(num_workers, ports=None):
  """One TF_CONFIG dict per task: a chief and `num_workers - 1` workers on loopback."""
  ports = ports or free_ports(num_workers)
  addresses = ['127.0.0.1:%d' % p for p in ports]
  cluster = {'chief': addresses[:1]}
  if num_workers > 1:
    cluster['worker'] = addresses[1:]
  tasks = [('chief', 0)] + [('worker', i) for i in range(num_workers - 1)]
  return [{'cluster': cluster, 'task': {'type': t, 'index': i}} for t, i in tasks]


def launch(argv, num_workers, env=None, timeout=None, stop_grace_secs=10, poll_secs=0.2):
  """Runs `python argv...` once per task; returns the list of exit codes (chief first).

  When a task exits non-zero the others are terminated (then killed after
  `stop_grace_secs`).  `timeout` bounds the whole run (tasks still running are killed).
  """
  if num_workers < 1:
    raise ValueError('num_workers must be >= 1. Received: num_workers=%r.' % num_workers)
  processes = []
  started = time.time()
  try:
    for tf_config in tf_configs(num_workers):
      task_env = dict(os.environ if env is None else env, TF_CONFIG=json.dumps(tf_config))
      processes.append(subprocess.Popen([sys.executable] + list(argv), env=task_env))
    while True:
      codes = [p.poll() for p in processes]
      if all(c is not None for c in codes):
        return codes
      failed = any(c not in (None, 0) for c in codes)
      late = timeout is not None and time.time() - started > timeout
      if failed or late:
        _stop(processes, stop_grace_secs)
        return [p.wait() for p in processes]
      time.sleep(poll_secs)
  finally:
    _stop(processes, 0)


def _stop(processes, grace_secs):
  for process in processes:
    if process.poll() is None:
      process.terminate()
  deadline = time.time() + grace_secs
  for process in processes:
    try:
      process.wait(max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()

"""Local GPUs: memory that grows as needed, and logical GPUs when asked for more than exist.

Memory.  TensorFlow's default is to reserve (nearly) all of a GPU's memory the first time a
process touches it, so a second process on the same card (an evaluator beside a trainer, a
test's child process, a second test worker) fails with "out of memory" before it starts.  Unless
the user configured GPU memory themselves (a `RunConfig(session_config=...)` with any
`gpu_options` field set, or the `TF_FORCE_GPU_ALLOW_GROWTH` environment variable), the first
estimator of a process sets `TF_FORCE_GPU_ALLOW_GROWTH=true`: TensorFlow then grows its memory
as needed, in this process and in the processes it starts.  It only takes effect if the process
has not used the GPU yet.  To reserve the memory up front instead, set
`TF_FORCE_GPU_ALLOW_GROWTH=false` or pass a `session_config` with `gpu_options`.

Logical GPUs.  `TPUConfig(num_shards=N)` with fewer than N GPUs splits the GPUs into N logical
GPUs (TensorFlow's virtual devices, set in our sessions' `ConfigProto` the way logical CPUs are
set with `device_count`), each capped at an equal share of its card's memory.  Replicas then
share a card: right for testing sharded code on a small machine, never faster.  Their gradients
are reduced on one device (NCCL does not run between logical GPUs of one card).
"""
import ctypes
import functools
import logging
import os

_log = logging.getLogger('tpu_estimator')

GROWTH_VARIABLE = 'TF_FORCE_GPU_ALLOW_GROWTH'
FALLBACK_MEMORY_MB = 4096  # per card, when the driver's NVML cannot say how much it has


def grow_memory_unless_configured(session_config):
  """Sets `TF_FORCE_GPU_ALLOW_GROWTH=true` unless the user configured GPU memory.

  Returns whether this call set it."""
  if GROWTH_VARIABLE in os.environ:
    return False
  if session_config is not None and session_config.gpu_options.ListFields():
    return False
  os.environ[GROWTH_VARIABLE] = 'true'
  return True


def split(num_logical, num_physical):
  """How many logical GPUs each of `num_physical` cards holds so that there are `num_logical`
  in all, as evenly as possible (earlier cards take the remainder)."""
  share, extra = divmod(num_logical, num_physical)
  return [share + (1 if i < extra else 0) for i in range(num_physical)]


def add_logical_gpus(config, counts):
  """Sets `config`'s virtual devices (a ConfigProto, changed in place): `counts[i]` logical GPUs
  on card i, each capped at an equal share of the card's memory."""
  virtual = config.gpu_options.experimental.virtual_devices
  del virtual[:]
  total = _card_memory_mb()
  for count in counts:
    device = virtual.add()
    device.memory_limit_mb.extend([float(total // max(count, 1))] * count)
  return config


@functools.lru_cache(maxsize=None)
def _card_memory_mb():
  """The smallest total memory of this machine's cards in MiB, from NVML (the driver's library),
  or `FALLBACK_MEMORY_MB`: asked once per process (every split session needs it)."""
  try:
    nvml = ctypes.CDLL('libnvidia-ml.so.1')
  except OSError:
    return _fallback('libnvidia-ml.so.1 could not be loaded')

  class _Memory(ctypes.Structure):
    _fields_ = [('total', ctypes.c_ulonglong), ('free', ctypes.c_ulonglong),
                ('used', ctypes.c_ulonglong)]

  if nvml.nvmlInit_v2() != 0:
    return _fallback('nvmlInit failed')
  try:
    count = ctypes.c_uint()
    if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0 or not count.value:
      return _fallback('no device counted')
    sizes = []
    for index in range(count.value):
      handle, memory = ctypes.c_void_p(), _Memory()
      if (nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0 or
          nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0):
        return _fallback('memory of device %d unknown' % index)
      sizes.append(memory.total >> 20)
    return min(sizes)
  finally:
    nvml.nvmlShutdown()


def _fallback(reason):
  _log.warning('GPU memory size unknown (%s): each card is taken to have %d MiB when split into '
               'logical GPUs.', reason, FALLBACK_MEMORY_MB)
  return FALLBACK_MEMORY_MB

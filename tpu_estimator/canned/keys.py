"""The metric and prediction keys of the canned heads (the original's `MetricKeys` and
`PredictionKeys`): users read `evaluate()` results and `predict()` dicts by these strings."""


class MetricKeys:
  """Keys of the metrics canned heads add to `evaluate()` results."""
  LOSS = 'loss'
  LOSS_MEAN = 'average_loss'
  LOSS_REGULARIZATION = 'regularization_loss'
  ACCURACY = 'accuracy'
  PRECISION = 'precision'
  RECALL = 'recall'
  ACCURACY_BASELINE = 'accuracy_baseline'
  AUC = 'auc'
  AUC_PR = 'auc_precision_recall'
  LABEL_MEAN = 'label/mean'
  PREDICTION_MEAN = 'prediction/mean'
  ACCURACY_AT_THRESHOLD = 'accuracy/positive_threshold_%g'
  PRECISION_AT_THRESHOLD = 'precision/positive_threshold_%g'
  RECALL_AT_THRESHOLD = 'recall/positive_threshold_%g'
  PROBABILITY_MEAN_AT_CLASS = 'probability_mean/class%d'
  AUC_AT_CLASS = 'auc/class%d'
  AUC_PR_AT_CLASS = 'auc_precision_recall/class%d'


class PredictionKeys:
  """Keys of the dicts canned heads return from `predict()`."""
  CLASSES = 'classes'
  CLASS_IDS = 'class_ids'
  ALL_CLASSES = 'all_classes'
  ALL_CLASS_IDS = 'all_class_ids'
  LOGISTIC = 'logistic'
  LOGITS = 'logits'
  PREDICTIONS = 'predictions'
  PROBABILITIES = 'probabilities'


# SignatureDef keys of the exports (the original's).
CLASSIFY_SIGNATURE = 'classification'
REGRESS_SIGNATURE = 'regression'
PREDICT_SIGNATURE = 'predict'

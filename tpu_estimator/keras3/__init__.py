"""Keras 3 layers inside a v1 graph: variable naming (`naming`) and the in-graph adaptation
(`in_graph`)."""

"""The control plane: per-topic leadership, layout changes, placement and consumer assignment."""
